import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SpeakAPI
import Synchronization

/// One listener (TCP or Unix socket) serving the shared router, as a `Service`.
///
/// A Unix socket's stale file is replaced at start, the new socket gets mode 0660, and the file
/// is removed when the listener stops.
public final class SpeakListener: Service, Sendable {
    /// Where it listens, as configured (port 0 stays 0 here).
    public let address: ListenAddress
    private let responder: RouterResponder<BasicRequestContext>
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var channel: (any Channel)?
        var bound: ListenAddress?
        var failure: (any Error)?
        var waiters: [CheckedContinuation<ListenAddress, any Error>] = []
    }

    /// - Parameters:
    ///   - address: where to listen.
    ///   - responder: the shared router's responder (`SpeakServer.buildRouter().buildResponder()`).
    ///   - logger: the listener's logger.
    public init(address: ListenAddress, responder: RouterResponder<BasicRequestContext>, logger: Logger) {
        self.address = address
        self.responder = responder
        self.logger = logger
    }

    public func run() async throws {
        let configuration: ApplicationConfiguration
        switch address {
        case .tcp(let host, let port):
            configuration = ApplicationConfiguration(address: .hostname(host, port: port), serverName: "speakd")
        case .unixSocket(let path):
            try Self.checkSocketPath(path)
            configuration = ApplicationConfiguration(address: .unixDomainSocket(path: path), serverName: "speakd")
        }
        let app = Application(
            responder: responder, configuration: configuration,
            onServerRunning: { [self] channel in self.listening(on: channel) },
            logger: logger)
        defer { stopped() }
        do {
            try await app.run()
        } catch {
            fail(error)
            throw error
        }
    }

    /// Waits until the listener accepts connections; returns the bound address (with the real
    /// port when 0 was asked for). Throws when the listener failed to start.
    public func waitUntilListening() async throws -> ListenAddress {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<ListenAddress, any Error>? = state.withLock { state in
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

    /// A stale socket is fine (it is replaced); a live one (another daemon answers) or anything
    /// that is not a socket is a configuration error.
    private static func checkSocketPath(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & S_IFMT != S_IFSOCK {
            throw ListenerError("\(path) exists and is not a socket; refusing to replace it")
        }
        if isListening(path) {
            throw ListenerError("another process is listening on \(path); refusing to replace its socket")
        }
    }

    /// Whether a connection to the socket at `path` is accepted.
    private static func isListening(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
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

/// Waiting for a listener that has already stopped.
struct ListenerStopped: Error, CustomStringConvertible {
    let address: ListenAddress
    var description: String { "the listener on \(address) has stopped" }
}
