import CMosquitto
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One MQTT 5 connection through libmosquitto, with its network thread (`mosquitto_loop_start`).
///
/// libmosquitto calls back on its own thread; every callback copies what it needs into Swift
/// values and yields them to `events`, an `AsyncStream` whose continuation may be used from any
/// thread, so Swift code only ever sees the connection through that stream and the thread-safe
/// calls (`publish`, `subscribe`) libmosquitto allows while its thread runs. Reconnection is
/// libmosquitto's (`mosquitto_reconnect_delay_set`), with the CONNECT properties (session
/// expiry) it kept from the first `mosquitto_connect_bind_v5`.
public final class MQTTClient: @unchecked Sendable {
    /// What happened on the connection.
    public enum Event: Sendable {
        /// The broker accepted the connection; `sessionPresent` when it kept our session.
        case connected(sessionPresent: Bool)
        /// The broker refused the connection (CONNACK reason code) or it was lost.
        case disconnected(reason: String)
        /// The broker acknowledged the QoS 1 message `publish` returned this id for (PUBACK), with
        /// its MQTT 5 reason code: 0 success, 0x10 no matching subscribers (accepted, but nobody
        /// will receive it), 0x80 and above refused (not authorised, quota exceeded, …).
        case published(messageID: Int32, reasonCode: Int32)
        /// A message arrived on a subscription. libmosquitto has already acknowledged it
        /// (PUBACK for QoS 1 goes out before this callback runs).
        case message(MQTTMessage)
    }

    /// How to reach the broker and who we are.
    public struct Options: Sendable {
        public var broker: MQTTBrokerURL
        public var clientID: String
        /// false keeps the session (subscriptions, QoS 1 messages queued while away) across reconnects.
        public var cleanStart: Bool
        /// How long the broker keeps the session after a disconnect, in seconds.
        public var sessionExpiry: UInt32
        public var username: String?
        public var password: String?
        /// A CA file for `mqtts://`; nil uses the system's trust store.
        public var caFile: String?
        /// Published by the broker when the connection is lost without a DISCONNECT.
        public var will: MQTTOutgoing?
        /// Seconds between keepalive pings; the broker notices a dead client after 1.5 times this.
        public var keepAlive: Int32
        /// The largest packet the broker may send us (MQTT 5 Maximum Packet Size in CONNECT, the
        /// whole packet: header, topic, properties and payload). The broker drops a larger
        /// message for this client without telling it or the sender; nil: no limit.
        public var maximumPacketSize: UInt32?
        /// A received payload longer than this is not copied out of libmosquitto's buffer: its
        /// message arrives with an empty `payload` and `payloadSize` its length. nil: no limit.
        public var payloadLimit: Int?

        public init(
            broker: MQTTBrokerURL, clientID: String, cleanStart: Bool = false, sessionExpiry: UInt32 = 3_600,
            username: String? = nil, password: String? = nil, caFile: String? = nil, will: MQTTOutgoing? = nil,
            keepAlive: Int32 = 10, maximumPacketSize: UInt32? = nil, payloadLimit: Int? = nil
        ) {
            self.broker = broker
            self.clientID = clientID
            self.cleanStart = cleanStart
            self.sessionExpiry = sessionExpiry
            self.username = username
            self.password = password
            self.caFile = caFile
            self.will = will
            self.keepAlive = keepAlive
            self.maximumPacketSize = maximumPacketSize
            self.payloadLimit = payloadLimit
        }
    }

    /// Everything that happens on the connection, in order.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let handle: OpaquePointer
    private let options: Options
    private let started = Mutex(false)
    private let stopped = Mutex(false)

    /// Creates the client; nothing connects until `start()`.
    /// - Throws: `MQTTError` for an option libmosquitto refuses (a TLS file it cannot read, …).
    public init(_ options: Options) throws {
        if let failure = MQTTClient.initialiseLibrary { throw MQTTError(failure) }
        self.options = options
        (events, continuation) = AsyncStream.makeStream(of: Event.self)
        guard let handle = mosquitto_new(options.clientID, options.cleanStart, nil) else {
            throw MQTTError("mosquitto_new", code: MOSQ_ERR_NOMEM.rawValue)
        }
        self.handle = handle
        let me = Unmanaged.passUnretained(self).toOpaque()
        mosquitto_user_data_set(handle, me)
        try check("protocol version", mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5))
        if let username = options.username {
            try check("username", mosquitto_username_pw_set(handle, username, options.password))
        }
        if options.broker.tls {
            if let caFile = options.caFile {
                try check("--mqtt-ca-file", mosquitto_tls_set(handle, caFile, nil, nil, nil, nil))
            } else {
                try check("TLS", mosquitto_int_option(handle, MOSQ_OPT_TLS_USE_OS_CERTS, 1))
            }
        }
        if let will = options.will {
            try will.payload.withUnsafeBytes { bytes in
                try check(
                    "last will",
                    mosquitto_will_set_v5(
                        handle, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos, will.retain, nil))
            }
        }
        // 1 s, doubling up to 30 s: quick after a broker restart, gentle while it stays away.
        try check("reconnect delay", mosquitto_reconnect_delay_set(handle, 1, 30, true))
        mosquitto_connect_v5_callback_set(handle) { _, object, rc, flags, _ in
            let client = Unmanaged<MQTTClient>.fromOpaque(object!).takeUnretainedValue()
            if rc == 0 {
                client.continuation.yield(.connected(sessionPresent: flags & 1 != 0))
            } else {
                client.continuation.yield(.disconnected(reason: String(cString: mosquitto_reason_string(rc))))
            }
        }
        mosquitto_disconnect_v5_callback_set(handle) { _, object, rc, _ in
            let client = Unmanaged<MQTTClient>.fromOpaque(object!).takeUnretainedValue()
            client.continuation.yield(
                .disconnected(reason: rc == 0 ? "disconnected" : String(cString: mosquitto_strerror(rc))))
        }
        mosquitto_publish_v5_callback_set(handle) { _, object, messageID, reasonCode, _ in
            let client = Unmanaged<MQTTClient>.fromOpaque(object!).takeUnretainedValue()
            client.continuation.yield(.published(messageID: messageID, reasonCode: reasonCode))
        }
        mosquitto_message_v5_callback_set(handle) { _, object, message, properties in
            guard let message else { return }
            let client = Unmanaged<MQTTClient>.fromOpaque(object!).takeUnretainedValue()
            client.continuation.yield(
                .message(
                    MQTTMessage(message.pointee, properties: properties, payloadLimit: client.options.payloadLimit)))
        }
    }

    deinit {
        mosquitto_destroy(handle)
    }

    /// Connects and starts the network thread. A broker that is down is not an error: the thread
    /// keeps trying with backoff and `events` says when it is connected.
    /// The MQTT 5 specification's name for a reason code ("No matching subscribers", "Not authorized").
    public static func reasonDescription(_ reasonCode: Int32) -> String {
        String(cString: mosquitto_reason_string(reasonCode))
    }

    public func start() {
        guard
            started.withLock({ started in
                defer { started = true }; return !started
            })
        else { return }
        var properties: OpaquePointer? = nil
        mosquitto_property_add_int32(
            &properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), options.sessionExpiry)
        if let maximumPacketSize = options.maximumPacketSize {
            mosquitto_property_add_int32(
                &properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), maximumPacketSize)
        }
        // Blocking only for the TCP connect; libmosquitto keeps these properties for its reconnects.
        let rc = mosquitto_connect_bind_v5(
            handle, options.broker.host, Int32(options.broker.port), options.keepAlive, nil, properties)
        mosquitto_property_free_all(&properties)
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            continuation.yield(.disconnected(reason: describe(rc)))
        }
        mosquitto_loop_start(handle)
    }

    /// Disconnects cleanly (no last will) and stops the network thread; only the first call
    /// does anything, since two threads joining the network thread would wait for ever.
    public func stop() {
        let running = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard running else { return }
        if started.withLock({ $0 }) {
            mosquitto_disconnect_v5(handle, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
            mosquitto_loop_stop(handle, false)
        }
        continuation.finish()
    }

    /// Subscribes; call again after every `connected` without a session present.
    public func subscribe(_ topic: String, qos: Int32 = 1) {
        mosquitto_subscribe_v5(handle, nil, topic, qos, 0, nil)
    }

    /// Queues a message for sending; QoS 1 messages are resent after a reconnect until acknowledged.
    /// - Returns: the message id that `Event.published` reports when the broker has it.
    /// - Throws: `MQTTError` when libmosquitto refuses it (too large, not connected at QoS 0).
    @discardableResult
    public func publish(_ message: MQTTOutgoing) throws -> Int32 {
        var properties: OpaquePointer? = nil
        defer { mosquitto_property_free_all(&properties) }
        if let responseTopic = message.responseTopic {
            mosquitto_property_add_string(&properties, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), responseTopic)
        }
        if let correlation = message.correlationData {
            correlation.withUnsafeBytes { bytes in
                _ = mosquitto_property_add_binary(
                    &properties, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), bytes.baseAddress, UInt16(bytes.count))
            }
        }
        if let expiry = message.messageExpiry {
            mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
        }
        mosquitto_property_add_string(&properties, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), "application/json")
        for (name, value) in message.userProperties {
            mosquitto_property_add_string_pair(&properties, Int32(MQTT_PROP_USER_PROPERTY.rawValue), name, value)
        }
        var messageID: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish_v5(
                handle, &messageID, message.topic, Int32(bytes.count), bytes.baseAddress, message.qos, message.retain,
                properties)
        }
        // Not connected: libmosquitto has queued a QoS 1 message and sends it after reconnecting.
        if rc != MOSQ_ERR_SUCCESS.rawValue && rc != MOSQ_ERR_NO_CONN.rawValue {
            throw MQTTError("publish to \(message.topic)", code: rc)
        }
        return messageID
    }

    private func check(_ what: String, _ rc: Int32) throws {
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw MQTTError(what, code: rc) }
    }

    private func describe(_ rc: Int32) -> String {
        rc == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(rc))
    }

    /// Loads libmosquitto and runs `mosquitto_lib_init`, once per process, before the first
    /// client: nil, or why the library cannot be used.
    private static let initialiseLibrary: String? = {
        if let failure = speakd_mosquitto_load() { return String(cString: failure) }
        mosquitto_lib_init()
        return nil
    }()
}

/// A failure libmosquitto reported.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ what: String, code: Int32) {
        let reason =
            code == MOSQ_ERR_ERRNO.rawValue
            ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(code))
        description = "\(what): \(reason)"
    }

    /// A failure of the link's own set-up, such as a credential file that cannot be read.
    public init(_ description: String) {
        self.description = description
    }
}

/// A message received, copied out of libmosquitto's buffers.
public struct MQTTMessage: Sendable {
    public var topic: String
    /// The payload; empty when it was longer than the client's `payloadLimit`.
    public var payload: Data
    /// The payload's length as received, also when it was not copied.
    public var payloadSize: Int
    public var qos: Int32
    public var retain: Bool
    /// MQTT 5 response topic, where the sender wants its answer.
    public var responseTopic: String?
    /// MQTT 5 correlation data, to be returned with the answer.
    public var correlationData: Data?
    /// MQTT 5 message expiry: seconds left when the broker forwarded it.
    public var messageExpiry: UInt32?

    public init(
        topic: String, payload: Data, qos: Int32 = 1, retain: Bool = false, responseTopic: String? = nil,
        correlationData: Data? = nil, messageExpiry: UInt32? = nil
    ) {
        self.topic = topic
        self.payload = payload
        self.payloadSize = payload.count
        self.qos = qos
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiry = messageExpiry
    }

    init(_ message: mosquitto_message, properties: OpaquePointer?, payloadLimit: Int?) {
        topic = String(cString: message.topic)
        payloadSize = Int(message.payloadlen)
        if let bytes = message.payload, payloadSize <= payloadLimit ?? .max {
            payload = Data(bytes: bytes, count: payloadSize)
        } else {
            payload = Data()
        }
        qos = message.qos
        retain = message.retain
        var string: UnsafeMutablePointer<CChar>? = nil
        if mosquitto_property_read_string(properties, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), &string, false) != nil,
            let string
        {
            responseTopic = String(cString: string)
            free(string)
        }
        var binary: UnsafeMutableRawPointer? = nil
        var length: UInt16 = 0
        if mosquitto_property_read_binary(
            properties, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &binary, &length, false) != nil
        {
            correlationData = binary.map { Data(bytes: $0, count: Int(length)) } ?? Data()
            free(binary)
        }
        var expiry: UInt32 = 0
        if mosquitto_property_read_int32(properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false)
            != nil
        {
            messageExpiry = expiry
        }
    }
}

/// A message to publish.
public struct MQTTOutgoing: Sendable {
    public var topic: String
    public var payload: Data
    public var qos: Int32
    public var retain: Bool
    public var responseTopic: String?
    public var correlationData: Data?
    /// Seconds the broker may keep it for a subscriber that is away.
    public var messageExpiry: UInt32?
    public var userProperties: [(String, String)]

    public init(
        topic: String, payload: Data, qos: Int32 = 1, retain: Bool = false, responseTopic: String? = nil,
        correlationData: Data? = nil, messageExpiry: UInt32? = nil, userProperties: [(String, String)] = []
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiry = messageExpiry
        self.userProperties = userProperties
    }
}

/// A broker address: `mqtt://HOST[:PORT]` (1883) or `mqtts://HOST[:PORT]` (8883, TLS).
public struct MQTTBrokerURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var tls: Bool

    /// - Throws: `MQTTError` naming what is wrong; credentials in the URL are refused, as they
    ///   would show in `ps` and logs (use the username and password-file options).
    public init(parsing text: String) throws {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "mqtt" || scheme == "mqtts"
        else {
            throw MQTTError("'\(text)' is not mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        }
        guard let host = url.host, !host.isEmpty else { throw MQTTError("'\(text)' has no host") }
        guard url.user == nil, url.password == nil else {
            throw MQTTError("'\(text)': give the user and password with the username and password-file options")
        }
        guard url.path.isEmpty || url.path == "/", url.query == nil else {
            throw MQTTError("'\(text)' has a path or query; expected mqtt://HOST[:PORT]")
        }
        tls = scheme == "mqtts"
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        port = url.port ?? (tls ? 8883 : 1883)
        guard (1...65535).contains(port) else { throw MQTTError("'\(text)': port \(port) is out of range") }
    }

    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}
