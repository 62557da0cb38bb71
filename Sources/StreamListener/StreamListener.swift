import Logging
import NIOCore
import NIOPosix
import PosixSupport
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket on SwiftNIO's shared event loops whose connections carry bytes both ways:
/// how the SSIP and Wyoming fronts listen, so the binding, the socket file's life and the accept
/// loop that graceful shutdown stops are written once.
public struct StreamListener: Sendable {
    /// One accepted connection.
    public typealias Connection = NIOAsyncChannel<ByteBuffer, ByteBuffer>

    /// Where to listen.
    public enum Address: Sendable {
        /// A TCP address, with `SO_REUSEADDR` and `TCP_NODELAY`.
        case tcp(host: String, port: Int)
        /// A Unix socket made at the path (a stale socket there is replaced), mode 0600, and
        /// removed when the listener stops.
        case unix(path: String)
        /// A listening socket made by systemd (socket activation): used as it is, and left in
        /// place when the listener stops.
        case descriptor(Int32)
    }

    /// Where it listens.
    public let address: Address
    private let server: NIOAsyncChannel<Connection, Never>

    /// The TCP port listened on (the one the system chose for port 0); nil on a Unix socket.
    public var port: Int? { server.channel.localAddress?.port }

    /// Binds the socket.
    /// - Parameters:
    ///   - address: where to listen.
    ///   - backlog: the listen backlog of a socket this call makes.
    ///   - name: the protocol's name in the log (`SSIP`); its metadata key is `speakd.` and the
    ///     name in lower case.
    ///   - logger: where a Unix socket whose mode cannot be set is logged.
    /// - Throws: NIO's error when the socket cannot be made.
    public static func bind(_ address: Address, backlog: Int, name: String, logger: Logger) async throws
        -> StreamListener
    {
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { channel in
            channel.eventLoop.makeCompletedFuture { try Connection(wrappingChannelSynchronously: channel) }
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        let server: NIOAsyncChannel<Connection, Never>
        switch address {
        case .tcp(let host, let port):
            server = try await bootstrap.serverChannelOption(.backlog, value: Int32(backlog))
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .bind(host: host, port: port, childChannelInitializer: initializer)
        case .unix(let path):
            UnixSocketFile.remove(path)
            server = try await bootstrap.serverChannelOption(.backlog, value: Int32(backlog))
                .bind(unixDomainSocketPath: path, childChannelInitializer: initializer)
            // systemd's socket has the mode its unit gives it (SocketMode=); this one is the owner's.
            if chmod(path, 0o600) != 0 {
                logger.error(
                    "could not set the \(name) socket's mode to 0600",
                    metadata: ["speakd.\(name.lowercased())": "\(path)"])
            }
        case .descriptor(let descriptor):
            server = try await bootstrap.bind(descriptor, childChannelInitializer: initializer)
        }
        return StreamListener(address: address, server: server)
    }

    /// Accepts connections, each served in a task of its own, until graceful shutdown closes the
    /// socket; then runs `afterAccepting` while the open connections go on, waits for them, and
    /// removes a Unix socket this listener made.
    /// - Parameters:
    ///   - connection: serves one connection until it ends.
    ///   - afterAccepting: ends the open connections, as the protocol's shutdown does.
    public func serve(
        _ connection: @escaping @Sendable (Connection) async -> Void, afterAccepting: () async -> Void
    ) async {
        let server = server
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                try? await server.executeThenClose { inbound in
                    for try await accepted in inbound {
                        group.addTask { await connection(accepted) }
                    }
                }
                await afterAccepting()
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
        if case .unix(let path) = address { UnixSocketFile.remove(path) }
    }
}
