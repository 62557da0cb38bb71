import Logging
import NIOCore
import PosixSupport
import ServiceLifecycle
import SpeakAPI
import StreamListener
import Synchronization

/// The Wyoming protocol on TCP or a Unix socket: Home Assistant's Wyoming integration speaks
/// through speakd as a TTS server (`tts.speak`) and, with a satellite output, as an announce
/// target (`assist_satellite.announce`).
///
/// The protocol has no authentication: anyone who can connect can speak and announce, so the
/// daemon listens on loopback unless told otherwise (docs/security.md). Every event is bounded
/// (`WyomingSettings`): a peer that claims a huge header, data or payload is sent an `error`
/// and disconnected before those bytes are held.
///
/// Graceful shutdown: the socket stops accepting, and each connection ends when its peer
/// leaves or the daemon's own shutdown closes it.
public final class WyomingServer: Service, Sendable {
    public let address: WyomingAddress
    private let backend: any WyomingBackend
    private let settings: WyomingSettings
    private let logger: Logger
    private let connections: OpenConnections<any Channel>
    private let listeningPort = Mutex<Int?>(nil)
    private let readiness = ReadinessLatch()

    /// - Parameters:
    ///   - address: where to listen.
    ///   - backend: the daemon, as the front sees it.
    ///   - settings: what is offered, and the bounds.
    ///   - logger: where connections and refusals are logged.
    public init(address: WyomingAddress, backend: any WyomingBackend, settings: WyomingSettings, logger: Logger) {
        self.address = address
        self.backend = backend
        self.settings = settings
        self.logger = logger
        self.connections = OpenConnections(limit: settings.maxConnections)
    }

    /// The TCP port listened on once listening (the one the system chose for port 0); nil before, or on a Unix socket.
    public var port: Int? { listeningPort.withLock { $0 } }

    public func run() async throws {
        let listener: StreamListener
        do {
            let listenAddress: StreamListener.Address =
                switch address {
                case .tcp(let host, let port): .tcp(host: host, port: port)
                case .unix(let path): .unix(path: path)
                }
            listener = try await StreamListener.bind(listenAddress, backlog: 256, name: "Wyoming", logger: logger)
        } catch {
            let failure = WyomingServerError(description: "cannot listen for Wyoming on \(address): \(error)")
            finishWaiting(failure, port: nil)
            throw failure
        }
        logger.info("listening for Wyoming", metadata: ["speakd.wyoming": "\(address)"])
        finishWaiting(nil, port: listener.port)
        await listener.serve({ await self.serve($0) }) {
            for channel in connections.values { channel.close(promise: nil) }
        }
    }

    /// Waits until the socket accepts connections; throws when it could not be made.
    public func waitUntilListening() async throws {
        try await readiness.wait()
    }

    private func finishWaiting(_ failure: (any Error)?, port: Int?) {
        listeningPort.withLock { $0 = port }
        if let failure { readiness.fail(failure) } else { readiness.open() }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let channel = connection.channel
        let peer =
            channel.remoteAddress.map { address in
                address.ipAddress.map { "\($0):\(address.port ?? 0)" } ?? "unix socket"
            } ?? "unix socket"
        let admitted = await connections.admit(connection, channel) {
            logger.warning(
                "Wyoming connection refused: at the connection limit",
                metadata: ["speakd.wyoming.peer": "\(peer)", "speakd.max_connections": "\(settings.maxConnections)"])
        }
        guard admitted else { return }
        defer { connections.remove(connection) }
        var connectionLogger = logger
        connectionLogger[metadataKey: "speakd.wyoming.peer"] = "\(peer)"
        do {
            try await connection.executeThenClose { inbound, outbound in
                try await converse(inbound: inbound, outbound: outbound, peer: peer, logger: connectionLogger)
            }
        } catch {
            connectionLogger.debug("Wyoming connection ended", metadata: ["speakd.error": "\(error)"])
        }
    }

    /// Reads `inbound`'s events and answers each, until the peer leaves or sends what cannot be read.
    private func converse(
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        peer: String, logger: Logger
    ) async throws {
        var reader = WyomingEventReader(limits: settings.readerLimits)
        let session = WyomingSession(
            backend: backend, settings: settings, peer: peer,
            send: { event in try await outbound.write(event.encoded()) }, logger: logger)
        do {
            reading: for try await buffer in inbound {
                let events: [WyomingEvent]
                do {
                    events = try reader.read(buffer)
                } catch {
                    logger.info(
                        "Wyoming connection closed: an event could not be read", metadata: ["speakd.error": "\(error)"])
                    try? await session.sendError(ErrorResponse(code: error.code, message: error.description))
                    break reading
                }
                for event in events {
                    if logger.logLevel <= .trace {
                        logger.trace(
                            "Wyoming event",
                            metadata: [
                                "speakd.wyoming.type": "\(event.type)", "speakd.bytes": "\(event.payload.count)",
                            ])
                    }
                    try await session.handle(event)
                }
            }
        } catch {
            logger.debug("Wyoming connection ended", metadata: ["speakd.error": "\(error)"])
        }
        // Announcements made on this connection still get their `played` if the peer is there.
        await session.finish()
    }
}

/// The Wyoming socket cannot be made.
public struct WyomingServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
