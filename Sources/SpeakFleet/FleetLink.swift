import FoundationEssentials
import Logging
import ServiceLifecycle
import SpeakAPI
import SpeakMQTT
import SpeakService
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A kiosk's link to its fleet: announcements from an MQTT broker into the queue, their events
/// and outcomes back to the broker, and a retained status with an `offline` last will.
///
/// An MQTT message body is a `POST /v1/announcements` body, decoded, prepared and submitted by
/// the same `AnnouncementIntake` the HTTP route uses, so it is checked and refused the same way;
/// a refusal goes to the message's response topic as a `refused` `FleetReport` with the same
/// error. MQTT 5 message expiry shortens `expiresAfter`.
///
/// Size. A payload over the HTTP body limit (`ServiceLimits.maxBodyBytes`) is refused with the HTTP route's
/// 413 `tooLarge` error (field `body`) before it is copied or decoded: the client leaves it in
/// libmosquitto's read buffer, which is freed once the callback returns. libmosquitto reads a
/// whole packet before that callback, so the link also asks the broker (MQTT 5 Maximum Packet
/// Size in CONNECT) for packets of at most `maximumPacketSize(bodyLimit:)`: a larger message is
/// dropped by the broker for this kiosk, which never sees it and answers nothing.
///
/// Delivery. libmosquitto acknowledges a QoS 1 message (PUBACK) as it receives it, before this
/// link sees it: the broker's guarantee ends there, and a message in this process when it dies
/// is lost (it was never queued, so no `queued` event was published either; a sender waiting for
/// outcomes sees the kiosk missing). What the broker redelivers — a message whose PUBACK was
/// lost with the connection, a sender's retry of a publish it never saw acknowledged — arrives
/// again; the `requestId` (or, without one, the correlation data) is claimed in the service's one
/// store of request ids (`SpeakService.requests`: the last 4,096 of this run in memory, and with a
/// state database the table that keeps them across restarts), and a repeat is dropped without a
/// second outcome.
/// A request the kiosk refused is forgotten, so the sender's retry is handled.
/// A message with neither cannot be told from a new one and is spoken again.
public final class FleetLink: Service, Sendable {
    /// The fleet settings.
    public let settings: FleetSettings

    /// The largest packet the kiosk takes from the broker: 4 MiB, or the body limit and 64 KiB
    /// of topic and properties when the limit is larger. Between the body limit and this a
    /// message is answered `tooLarge`; above it the broker drops it and the sender hears nothing.
    /// It bounds what one message costs the kiosk (libmosquitto holds one packet at a time).
    public static func maximumPacketSize(bodyLimit: Int) -> UInt32 {
        UInt32(clamping: max(4 << 20, bodyLimit + (64 << 10)))
    }

    private let service: any SpeakService
    private let client: MQTTClient
    /// Where the link's messages go: the broker's client, or in a test what records them.
    private let outbox: @Sendable (MQTTOutgoing) throws -> Void
    private let logger: Logger
    private let state: Mutex<HealthReport.MQTT>
    private let book = FleetBook()
    /// The request ids and outcomes kept in the database (`--state-dir`), so a message the broker
    /// redelivers after a restart is answered with its first outcome and not spoken again.
    private let memory: any RequestMemory
    /// Whether the fleet's schedule commands are taken: when the kiosk keeps state.
    private let schedules: Bool
    /// The retained status last handed to the broker: one that did not change is not sent again
    /// (a `queued` and a `started` often find the same queue). Cleared on each connect.
    private let lastStatus = Mutex<Data?>(nil)

    /// - Parameters:
    ///   - settings: broker, device id, site, groups, credentials.
    ///   - service: the one door, which this link calls for everything.
    ///   - logger: where connection changes and refusals are logged.
    ///   - schedules: whether the fleet's schedule commands are taken (the kiosk keeps state).
    /// - Throws: `MQTTError` for a password file or TLS option that cannot be used.
    public convenience init(
        settings: FleetSettings, service: any SpeakService, logger: Logger, schedules: Bool = false
    ) throws {
        try self.init(settings: settings, service: service, logger: logger, schedules: schedules, outbox: nil)
    }

    /// The link as ``init(settings:service:logger:schedules:)`` makes it, its messages handed to
    /// `outbox` instead of the broker when one is given (a front's tests, with no broker).
    init(
        settings: FleetSettings, service: any SpeakService, logger: Logger, schedules: Bool,
        outbox: (@Sendable (MQTTOutgoing) throws -> Void)?
    ) throws {
        self.settings = settings
        self.memory = service.requests
        self.schedules = schedules
        self.service = service
        self.logger = logger
        let offline = FleetStatus(state: .offline, device: settings.device, site: settings.site)
        let client = try MQTTClient(
            .init(
                broker: settings.broker, clientID: settings.device, cleanStart: false, sessionExpiry: 86_400,
                username: settings.username, password: try settings.password(), caFile: settings.caFile,
                will: MQTTOutgoing(
                    topic: settings.topics.status(settings.device), payload: Self.encode(offline), retain: true),
                maximumPacketSize: Self.maximumPacketSize(bodyLimit: service.limits.maxBodyBytes),
                payloadLimit: service.limits.maxBodyBytes))
        self.client = client
        self.outbox = outbox ?? { message in _ = try client.publish(message) }
        state = Mutex(
            HealthReport.MQTT(
                state: .connecting, broker: settings.broker.description, device: settings.device,
                detail: "not connected yet"))
    }

    /// The link's state for `/healthz`.
    public var health: HealthReport.MQTT { state.withLock { $0 } }

    public func run() async throws {
        // The first connect blocks for the TCP handshake only; a broker that is down is retried
        // in the background, and speaking goes on meanwhile.
        let client = client
        await Task.detached { client.start() }.value
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.followConnection() }
            group.addTask { await self.forwardEvents() }
            try? await gracefulShutdown()
            // A retained `offline` on purpose, since a clean disconnect sends no last will.
            publish(
                MQTTOutgoing(
                    topic: settings.topics.status(settings.device),
                    payload: Self.encode(FleetStatus(state: .offline, device: settings.device, site: settings.site)),
                    retain: true))
            client.stop()
            group.cancelAll()
        }
    }

    // MARK: Connection and messages

    private func followConnection() async {
        for await event in client.events {
            switch event {
            case .connected(let sessionPresent):
                state.withLock { $0 = HealthReport.MQTT(state: .connected, broker: $0.broker, device: $0.device) }
                logger.info(
                    "connected to the MQTT broker",
                    metadata: [
                        "speakd.mqtt": "\(settings.broker)",
                        "speakd.mqtt-session": "\(sessionPresent ? "kept" : "new")",
                    ])
                // Also with a session present: a broker restarted without persistence forgot it.
                for topic in settings.subscriptions { client.subscribe(topic) }
                if schedules { for topic in settings.scheduleSubscriptions { client.subscribe(topic) } }
                lastStatus.withLock { $0 = nil }
                await publishStatus()
            case .disconnected(let reason):
                let wasConnected = state.withLock { state in
                    defer {
                        state = HealthReport.MQTT(
                            state: .connecting, broker: state.broker, device: state.device, detail: reason)
                    }
                    return state.state == .connected
                }
                if wasConnected {
                    logger.warning(
                        "lost the MQTT broker; reconnecting",
                        metadata: ["speakd.mqtt": "\(settings.broker)", "speakd.error": "\(reason)"])
                } else {
                    logger.debug(
                        "MQTT broker not reachable; retrying",
                        metadata: ["speakd.mqtt": "\(settings.broker)", "speakd.error": "\(reason)"])
                }
            case .published:
                break
            case .message(let message):
                await handle(message)
            }
        }
    }

    /// Decodes, deduplicates and submits one announcement; a refusal is reported, never thrown.
    func handle(_ message: MQTTMessage) async {
        let topics = settings.topics
        if schedules, settings.scheduleSubscriptions.contains(message.topic) {
            return await handleSchedule(message)
        }
        if message.topic == topics.session(settings.device) || message.topic == topics.sessionEnd(settings.device) {
            return await handleSession(message, end: message.topic == topics.sessionEnd(settings.device))
        }
        let correlation = message.correlationData.map(\.lowercaseHex)
        var request: AnnouncementRequest
        do {
            // First: an oversized payload was never copied (`payload` is empty). Its chimes and
            // output are checked once, where the intake prepares it.
            try service.limits.checkBodySize(message.payloadSize)
            request = try service.limits.decode(Data(message.payload))
        } catch {
            refuse(message, requestId: correlation, error, counted: false)
            return
        }
        let requestId = request.requestId ?? correlation
        // The service's one store of request ids: seen in this run, dropped; seen before a
        // restart, answered with what became of it then.
        if let requestId, let seen = await Self.claim(requestId, in: memory, logger: logger) {
            if seen.thisRun {
                logger.debug(
                    "MQTT message delivered again; not spoken twice", metadata: ["speakd.request": "\(requestId)"])
            } else {
                await answerRedelivery(message, requestId: requestId, seen: seen, memory: memory)
            }
            return
        }
        request.delivery.expiresAfter = Self.expiresAfter(
            body: request.delivery.expiresAfter, messageExpiry: message.messageExpiry)
        let accepted: AnnouncementAccepted
        do {
            // The same `accept` as every front's: it counts and records the refusal.
            accepted = try await service.accept(request, origin: Self.origin(of: message, requestId: requestId))
        } catch {
            // Nothing was queued: a retry of this request (the answer to `queueFull` or
            // `audioUnavailable`) is a new attempt, not a redelivery.
            if let requestId { _ = try? await memory.forget(requestId) }
            refuse(message, requestId: requestId, error, counted: true)
            return
        }
        if let requestId { _ = try? await memory.accepted(requestId, announcement: accepted.id) }
        guard message.responseTopic != nil || requestId != nil else { return }
        let service = service
        let settings = settings
        let memory = memory
        Task {
            // The queue's own record, not the event stream: a kiosk that fell behind on the
            // stream still answers the sender exactly once.
            guard let finished = try? await service.finished(id: accepted.id) else { return }
            let report = FleetReport(
                type: .finished, device: settings.device, site: settings.site, requestId: requestId, event: finished)
            if let requestId { _ = try? await memory.outcome(requestId, report: Self.encode(report)) }
            guard let responseTopic = message.responseTopic else { return }
            self.publish(
                MQTTOutgoing(
                    topic: responseTopic, payload: Self.encode(report), correlationData: message.correlationData))
        }
    }

    /// What became of `requestId` when it was seen before (in this run or an earlier one), else
    /// nil, having claimed it. A database that cannot be read is logged, and the request taken as
    /// new (this run's ids are known without it).
    private static func claim(_ requestId: String, in memory: any RequestMemory, logger: Logger) async -> SeenRequest? {
        do {
            return try await memory.claim(requestId, at: Date())
        } catch {
            logger.warning(
                "the fleet's request ids cannot be read; the request is taken as new",
                metadata: ["speakd.request": "\(requestId)", "speakd.error": "\(error)"])
            return nil
        }
    }

    /// Answers a message seen before a restart with its outcome then, without speaking it: the
    /// `finished` or `refused` report it had, or, when speakd stopped before it finished, a
    /// `finished` `failed` one (kept as its outcome from then on).
    private func answerRedelivery(
        _ message: MQTTMessage, requestId: String, seen: SeenRequest, memory: any RequestMemory
    ) async {
        logger.info(
            "MQTT message seen before the restart; answered with its outcome, not spoken again",
            metadata: ["speakd.request": "\(requestId)"])
        var payload = seen.report
        if payload == nil {
            let event = AnnouncementEvent(
                type: .finished, id: seen.announcement ?? "", text: "", priority: .default, timestamp: Date(),
                success: false, reason: .failed, detail: "speakd stopped before it finished")
            let report = FleetReport(
                type: .finished, device: settings.device, site: settings.site, requestId: requestId, event: event)
            payload = Self.encode(report)
            _ = try? await memory.outcome(requestId, report: payload!)
        }
        guard let responseTopic = message.responseTopic, let payload else { return }
        publish(MQTTOutgoing(topic: responseTopic, payload: payload, correlationData: message.correlationData))
    }

    /// Starts, changes or ends a session as `PUT`/`DELETE /v1/session` would; the answer (a
    /// `session` report or a refusal) goes to the response topic. The `session` event itself
    /// reaches the events topic with every other event.
    private func handleSession(_ message: MQTTMessage, end: Bool) async {
        let correlation = message.correlationData.map(\.lowercaseHex)
        let change: SessionChange
        do {
            try service.limits.checkBodySize(message.payloadSize)
            let request = try service.limits.decodeSession(Data(message.payload))
            if end {
                change = try await service.endSession(request)
            } else {
                change = try await service.putSession(request)
            }
        } catch {
            refuse(message, requestId: correlation, error, counted: false)
            return
        }
        guard let responseTopic = message.responseTopic else { return }
        var report = FleetReport(type: .session, device: settings.device, site: settings.site, requestId: correlation)
        report.session = change
        publish(
            MQTTOutgoing(topic: responseTopic, payload: Self.encode(report), correlationData: message.correlationData))
    }

    /// The request an event is of, as its origin names it: an MQTT message's `requestId` (or
    /// correlation data); nil for an announcement from another front. So no event is held back to
    /// wait for the submission that names its request.
    static func requestId(of event: AnnouncementEvent) -> String? {
        event.origin?.front == "mqtt" ? event.origin?.requestId : nil
    }

    /// An MQTT announcement's origin: its topic and request id (a subscriber is not told which
    /// client published a message).
    static func origin(of message: MQTTMessage, requestId: String?) -> AnnouncementOrigin {
        AnnouncementOrigin(
            front: "mqtt", detail: "topic=\(message.topic)" + (requestId.map { " requestId=\($0)" } ?? ""),
            requestId: requestId)
    }

    /// Adds, changes or deletes a schedule as `POST`/`PATCH`/`DELETE /v1/schedules` would; the
    /// answer (a `schedule` report or a refusal) goes to the response topic, and the `schedule`
    /// event reaches the events topic with every other event.
    private func handleSchedule(_ message: MQTTMessage) async {
        let correlation = message.correlationData.map(\.lowercaseHex)
        let change: (id: String, change: ScheduleChange.Kind)
        do {
            try service.limits.checkBodySize(message.payloadSize)
            let command = try ScheduleCommand(json: Data(message.payload))
            switch command {
            case .add(let body):
                change = (try await service.createSchedule(body).id, .created)
            case .update(let id, let patch):
                change = (try await service.updateSchedule(id: id, patch: patch).id, .updated)
            case .delete(let id):
                try await service.deleteSchedule(id: id)
                change = (id, .deleted)
            }
        } catch {
            refuse(message, requestId: correlation, error, counted: true)
            return
        }
        guard let responseTopic = message.responseTopic else { return }
        var event = AnnouncementEvent(type: .schedule, id: change.id, text: "", priority: .default, timestamp: Date())
        event.schedule = ScheduleChange(change: change.change)
        let report = FleetReport(
            type: .schedule, device: settings.device, site: settings.site, requestId: correlation, event: event)
        publish(
            MQTTOutgoing(topic: responseTopic, payload: Self.encode(report), correlationData: message.correlationData))
    }

    /// Answers a refusal on the events topic and the response topic.
    /// - Parameter counted: whether the service counted and recorded it already (its `accept`
    ///   does); a refusal before the service was called is counted here, except a schedule
    ///   command's, which is no announcement.
    private func refuse(_ message: MQTTMessage, requestId: String?, _ error: SpeakError, counted: Bool) {
        let body = error.response
        if !counted {
            service.countRefusal(error, origin: Self.origin(of: message, requestId: requestId), output: nil)
        }
        logger.info(
            "MQTT announcement refused",
            metadata: ["speakd.topic": "\(message.topic)", "speakd.error": "\(body)"])
        let report = FleetReport(
            type: .refused, device: settings.device, site: settings.site, requestId: requestId, error: body.error)
        let payload = Self.encode(report)
        publish(MQTTOutgoing(topic: settings.topics.events(settings.device), payload: payload))
        if let responseTopic = message.responseTopic {
            publish(MQTTOutgoing(topic: responseTopic, payload: payload, correlationData: message.correlationData))
        }
    }

    // MARK: Events and status

    /// Publishes every event of every output's queue to the events topic, resubscribing after
    /// falling behind.
    private func forwardEvents() async {
        // What a reader that fell behind missed is in each request's own answer (`finished(id:)`).
        for await case .event(let event) in service.followEvents(after: service.lastEventSequence, progress: false) {
            await flush([(event, Self.requestId(of: event))])
        }
    }

    private func flush(_ events: [(AnnouncementEvent, String?)]) async {
        guard !events.isEmpty else { return }
        for (event, requestId) in events {
            let type: FleetReport.Kind? =
                switch event.type {
                case .queued: .queued
                case .started: .started
                case .finished: .finished
                case .session: .session
                case .repeat: .repeat
                // Pauses are the kiosk's own business; the fleet hears the outcome.
                case .paused, .resumed: nil
                // The fleet's stream is subscribed without progress events.
                case .word, .sentence, .mark, .clip: nil
                case .headset: .headset
                case .schedule: .schedule
                }
            guard let type else { continue }
            let report = FleetReport(
                type: type, device: settings.device, site: settings.site, requestId: requestId, event: event)
            publish(MQTTOutgoing(topic: settings.topics.events(settings.device), payload: Self.encode(report)))
        }
        await publishStatus()
    }

    private func publishStatus() async {
        let health = await service.health()
        let queue = health.queue ?? HealthReport.Queue(waiting: 0, speaking: false, capacity: 0)
        let voices = await book.voices(from: service)
        let status = FleetStatus(
            state: .online, device: settings.device, site: settings.site, groups: settings.groups, voices: voices,
            outputs: health.outputs.map { $0.map { "\($0.name)=\($0.sink)" } } ?? [health.audio.sink],
            audio: health.audio.state,
            queue: queue)
        let payload = Self.encode(status)
        let changed = lastStatus.withLock { last in
            defer { last = payload }
            return last != payload
        }
        guard changed else { return }
        publish(MQTTOutgoing(topic: settings.topics.status(settings.device), payload: payload, retain: true))
    }

    private func publish(_ message: MQTTOutgoing) {
        var message = message
        message.userProperties.append(("device", settings.device))
        do {
            try outbox(message)
        } catch {
            logger.warning("MQTT publish failed", metadata: ["speakd.error": "\(error)"])
        }
    }

    /// The smaller of the body's `expiresAfter` and the seconds of MQTT 5 message expiry left
    /// when the broker forwarded the message.
    static func expiresAfter(body: Double?, messageExpiry: UInt32?) -> Double? {
        guard let messageExpiry else { return body }
        return min(body ?? .infinity, Double(messageExpiry))
    }

    static func encode(_ value: some Encodable) -> Data {
        (try? WireFormat.encoder().encode(value)) ?? Data("{}".utf8)
    }
}

/// The link's memory: the languages of the voices for its status. Which request an event is of,
/// its origin says; which requests were seen, the service's one store (`SpeakService.requests`).
actor FleetBook {
    private var voiceLanguages: [String]?

    /// The languages of the renderer's voices, asked once.
    func voices(from service: any SpeakService) async -> [String] {
        if let voiceLanguages { return voiceLanguages }
        let voices = (try? await service.voices()) ?? []
        let languages = Array(Set(voices.compactMap(\.languages.first))).sorted()
        voiceLanguages = languages
        return languages
    }
}
