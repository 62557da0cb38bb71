import Logging
import NIOCore
import PosixSupport
import ServiceLifecycle
import SpeakService
import StreamListener

/// speech-dispatcher's protocol (SSIP) on a Unix socket, through the intake: `spd-say`,
/// python3-speechd, Orca and browsers' Web Speech API speak through speakd unchanged (with
/// `SPEECHD_ADDRESS=unix_socket:PATH`).
///
/// SwiftNIO, which the daemon runs on already for HTTP, carries the sockets: one event loop
/// serves every connection, a client that does not read is bounded by `SSIPOutbox`, and idle
/// connections cost a descriptor and a few kilobytes each. The protocol itself is a hand-written
/// line reader (`SSIPLineReader`) and one `SSIPSession` per connection.
///
/// Graceful shutdown: the socket stops accepting; connections stay open until the queues have
/// finished every message (so each gets its 702 or 703), then close.
public final class SSIPListener: Service, Sendable {
    /// Bounds of one connection.
    public struct Limits: Sendable {
        /// The longest command line, in bytes.
        public var maxLine = 4_096
        /// The most bytes of one message's text.
        public var maxMessageBytes = 1 << 20
        /// The most bytes sent but not yet read by the client before the connection is dropped.
        public var maxUnsent = 1 << 20
        /// The most open connections; one more is closed at once, and the open ones (a browser
        /// that connected once and keeps its connection) are never evicted for it.
        public var maxConnections = 4_096

        public init() {}
    }

    /// The socket's path.
    public let path: String
    /// The listening socket systemd made (socket activation), or nil to make it at `path`.
    public let activatedDescriptor: Int32?
    private let service: any SpeakService
    private let limits: Limits
    private let logger: Logger
    private let hub: SSIPHub
    private let connections: OpenConnections<(channel: any Channel, outbox: SSIPOutbox)>
    private let readiness = ReadinessLatch()

    /// - Parameters:
    ///   - path: the Unix socket to listen on; a stale socket there is replaced.
    ///   - activatedDescriptor: the socket at `path` as systemd passed it (socket activation),
    ///     which is used as it is and left in place at exit; nil to make the socket.
    ///   - service: the one door, which every message goes through.
    ///   - limits: bounds of each connection.
    ///   - logger: where connections and refusals are logged.
    public init(
        path: String, activatedDescriptor: Int32? = nil, service: any SpeakService, limits: Limits = Limits(),
        logger: Logger
    ) {
        self.path = path
        self.activatedDescriptor = activatedDescriptor
        self.service = service
        self.logger = logger
        // One message's text: the intake's character limit at four bytes each, at least 4 kB.
        var limits = limits
        limits.maxMessageBytes = min(limits.maxMessageBytes, max(4_096, service.limits.maxTextLength * 4))
        self.limits = limits
        self.connections = OpenConnections(limit: limits.maxConnections)
        self.hub = SSIPHub(service: service)
    }

    public func run() async throws {
        let hub = hub
        // Subscribed before the socket exists, so no accepted message's events can be missed.
        let start = service.lastEventSequence
        let follower = Task { await hub.follow(after: start) }
        defer { follower.cancel() }
        let listener: StreamListener
        do {
            listener = try await StreamListener.bind(
                activatedDescriptor.map { .descriptor($0) } ?? .unix(path: path), backlog: 1_024, name: "SSIP",
                logger: logger)
        } catch {
            let failure = SSIPListenerError(description: "cannot listen for SSIP on \(path): \(error)")
            finishWaiting(failure)
            throw failure
        }
        logger.info(
            activatedDescriptor == nil ? "listening for SSIP" : "listening for SSIP on systemd's socket",
            metadata: ["speakd.ssip": "\(path)"])
        finishWaiting(nil)
        await listener.serve({ await self.serve($0) }) {
            // No new connections; the open ones keep their notifications until every
            // message has finished.
            await follower.value
            for connection in connections.values { connection.outbox.close() }
            // A second for clients to read their last notifications; then the rest are closed.
            for _ in 0..<20 where !connections.isEmpty {
                try? await Task.sleep(for: .milliseconds(50))
            }
            for connection in connections.values { connection.channel.close(promise: nil) }
        }
    }

    /// Waits until the socket accepts connections; throws when it could not be made.
    public func waitUntilListening() async throws {
        try await readiness.wait()
    }

    private func finishWaiting(_ failure: (any Error)?) {
        if let failure { readiness.fail(failure) } else { readiness.open() }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let channel = connection.channel
        let outbox = SSIPOutbox(limit: limits.maxUnsent)
        let admitted = await connections.admit(connection, (channel, outbox)) {
            logger.warning(
                "SSIP connection refused: at the connection limit",
                metadata: ["speakd.ssip": "\(path)", "speakd.max_connections": "\(limits.maxConnections)"])
        }
        guard admitted else { return }
        defer { connections.remove(connection) }
        let client = await hub.newClient()
        var connectionLogger = logger
        connectionLogger[metadataKey: "speakd.ssip.client"] = "\(client)"
        let session = SSIPSession(
            client: client, service: service, hub: hub, outbox: outbox, maxDataBytes: limits.maxMessageBytes,
            logger: connectionLogger)
        var reader = SSIPLineReader(maxLine: limits.maxLine)
        do {
            try await connection.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await text in outbox.stream {
                            let bytes = text.utf8.count
                            try await outbound.write(ByteBuffer(string: text))
                            outbox.wrote(bytes)
                        }
                        // Closed: the client left, quit, or stopped reading.
                        channel.close(promise: nil)
                    }
                    reading: for try await buffer in inbound {
                        var bytes = buffer.readableBytesView
                        while let line = reader.next(from: &bytes) {
                            outbox.beginCommand()
                            let isText = session.isReceivingText
                            let outcome = await session.handle(line)
                            if connectionLogger.logLevel <= .trace {
                                connectionLogger.trace(
                                    "SSIP line",
                                    metadata: [
                                        "speakd.ssip.line": "\(line.logged(isText: isText))",
                                        "speakd.ssip.reply": "\(outcome)",
                                    ])
                            }
                            // A line of SPEAK's text may be as long as the whole message.
                            reader.maxLine = session.isReceivingText ? limits.maxMessageBytes : limits.maxLine
                            switch outcome {
                            case .nothing:
                                outbox.reply(nil)
                            case .reply(let reply):
                                outbox.reply(reply)
                            case .replyAndClose(let reply):
                                outbox.reply(reply)
                                break reading
                            }
                        }
                    }
                    outbox.close()
                    try await group.waitForAll()
                }
            }
        } catch {
            connectionLogger.debug("SSIP connection ended", metadata: ["speakd.error": "\(error)"])
        }
        outbox.close()
    }
}

/// The SSIP socket cannot be made.
public struct SSIPListenerError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
