import FoundationEssentials
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import SpeakAPI
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One listener (TCP or Unix socket) serving the shared router, as a `Service`.
///
/// A Unix socket's stale file is replaced at start, the new socket gets mode 0660, and the file
/// is removed when the listener stops. Connections are bounded in number and in the time each
/// phase of a request may take (`ConnectionLimits`).
public final class SpeakListener: Service, Sendable {
    /// Where it listens, as configured (port 0 stays 0 here).
    public let address: SpeakEndpoint
    /// How many connections it holds and their timeouts.
    public let limits: ConnectionLimits
    private let responder: RouterResponder<BasicRequestContext>
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var channel: (any Channel)?
        var bound: SpeakEndpoint?
        var failure: (any Error)?
        var waiters: [CheckedContinuation<SpeakEndpoint, any Error>] = []
    }

    /// - Parameters:
    ///   - address: where to listen.
    ///   - responder: the shared router's responder (`SpeakServer.buildRouter().buildResponder()`).
    ///   - limits: how many connections it holds and their timeouts.
    ///   - logger: the listener's logger.
    public init(
        address: SpeakEndpoint, responder: RouterResponder<BasicRequestContext>,
        limits: ConnectionLimits = ConnectionLimits(), logger: Logger
    ) {
        self.address = address
        self.limits = limits
        self.responder = responder
        self.logger = logger
    }

    public func run() async throws {
        let bind: BindAddress
        switch address {
        case .tcp(let host, let port):
            bind = .hostname(host, port: port)
        case .unixSocket(let path):
            do {
                try Self.checkSocketPath(path)
            } catch {
                // Before `stopped()` is armed: the socket that is there belongs to someone else.
                fail(error)
                throw error
            }
            bind = .unixDomainSocket(path: path)
        }
        defer { stopped() }
        do {
            // At the limit the connection idle longest is closed to make room; when every one is
            // busy the listener stops accepting, so further connections wait in the kernel's
            // backlog rather than taking descriptors the daemon needs.
            let registry = ConnectionRegistry()
            let configuration = ServerConfiguration(
                address: bind, serverName: "speakd",
                availableConnectionsDelegate: EvictingConnectionLimit(
                    maxConnections: limits.maxConnections, registry: registry))
            let limits = limits
            let logger = logger
            let responder = responder
            let isUnix = if case .unixSocket = address { true } else { false }
            // The server alone, not Hummingbird's `Application`: it also runs a task that formats
            // the `Date` header every second, which woke an idle daemon once a second per
            // listener. `HTTPDate` formats it when a response is written, once per second at most.
            let date = HTTPDate()
            let server = try HTTPServerBuilder { responder in
                GuardedHTTP1Channel(responder: responder, limits: limits, registry: registry, logger: logger)
            }
            .buildServer(
                configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: logger,
                responder: { request, writer, channel in
                    var request = request
                    if isUnix || request.headers[.speakdPeer] != nil {
                        var head = request.head
                        head.headerFields[.speakdPeer] = nil
                        if isUnix {
                            head.headerFields[.speakdPeer] = await PeerCredentials.read(from: channel)?.description
                        }
                        request = Request(head: head, body: request.body)
                    }
                    // Sign-in failures are counted by the peer's address; only a sign-in needs it.
                    if request.uri.path == "/v1/login" || request.headers[.speakdClient] != nil {
                        var head = request.head
                        head.headerFields[.speakdClient] = isUnix ? nil : channel.remoteAddress?.ipAddress
                        request = Request(head: head, body: request.body)
                    }
                    let context = BasicRequestContext(source: .init(channel: channel, logger: logger))
                    var response: Response
                    do {
                        response = try await responder.respond(to: request, context: context)
                    } catch let error as HTTPParserError {
                        throw error
                    } catch {
                        logger.debug("unrecognised error", metadata: ["speakd.error": "\(error)"])
                        response = Response(status: .internalServerError, body: .init())
                    }
                    response.headers[.date] = date.now
                    response.headers[.server] = "speakd"
                    do {
                        try await writer.write(response: response.head, body: response.body)
                    } catch is HTTPParserError {
                        // Rethrown, the parse error would make the channel write a second
                        // response (its 400); any other error only ends the connection.
                        throw ResponseCutShort()
                    }
                },
                onServerRunning: { [self] channel in self.listening(on: channel) })
            try await server.run()
        } catch {
            // Before it listened (a port in use), say where; NIO's error names only the call.
            let neverListened = state.withLock { $0.bound == nil }
            let failure: any Error = neverListened ? ListenerError("cannot listen on \(address): \(error)") : error
            fail(failure)
            throw failure
        }
    }

    /// Waits until the listener accepts connections; returns the bound address (with the real
    /// port when 0 was asked for). Throws when the listener failed to start.
    public func waitUntilListening() async throws -> SpeakEndpoint {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<SpeakEndpoint, any Error>? = state.withLock { state in
                if let bound = state.bound { return .success(bound) }
                if let failure = state.failure { return .failure(failure) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Waits until the listening socket is closed (new connections are refused from then on).
    public func waitUntilClosed() async {
        let channel = state.withLock { $0.channel }
        try? await channel?.closeFuture.get()
    }

    private func listening(on channel: any Channel) {
        var bound = address
        if case .tcp(let host, _) = address, let port = channel.localAddress?.port {
            bound = .tcp(host: host, port: port)
        }
        if case .unixSocket(let path) = address, chmod(path, 0o660) != 0 {
            logger.error(
                "could not set the socket's mode to 0660",
                metadata: ["speakd.socket": "\(path)", "speakd.errno": "\(errno)"])
        }
        let waiters = state.withLock { state in
            state.channel = channel
            state.bound = bound
            defer { state.waiters = [] }
            return state.waiters
        }
        logger.info("listening", metadata: ["speakd.address": "\(bound)"])
        for waiter in waiters { waiter.resume(returning: bound) }
    }

    private func fail(_ error: any Error) {
        let waiters = state.withLock { state in
            state.failure = error
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    private func stopped() {
        fail(ListenerStopped(address: address))
        if case .unixSocket(let path) = address, Self.isSocket(path) {
            unlink(path)
        }
    }

    /// Checks that the daemon may bind `path`: a stale socket is fine (it is replaced); a live one
    /// (another speakd answers there) or anything that is not a socket is an error. The daemon
    /// calls this before it starts anything, so a second instance exits at once.
    public static func checkSocketPath(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & S_IFMT != S_IFSOCK {
            throw ListenerError("\(path) exists and is not a socket; refusing to replace it")
        }
        if isListening(path) {
            throw ListenerError(
                "another speakd answers on the socket \(path); refusing to replace it (stop that one first, or use --socket)"
            )
        }
    }

    /// Whether a connection to the socket at `path` is accepted.
    private static func isListening(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard let address = UnixSocketAddress(path: path) else { return false }
        return address.withSocketAddress { connect(descriptor, $0, $1) == 0 }
    }

    private static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }
}

/// A listener that cannot start.
public struct ListenerError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A request's body turned out malformed while its response was being written: the connection
/// ends, since a response has begun.
struct ResponseCutShort: Error {}

/// Waiting for a listener that has already stopped.
struct ListenerStopped: Error, CustomStringConvertible {
    let address: SpeakEndpoint
    var description: String { "the listener on \(address) has stopped" }
}
