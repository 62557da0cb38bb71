import Logging
import ServiceLifecycle
import SpeakAPI
import Synchronization

/// Runs every listener and orders their shutdown: on graceful shutdown the listening sockets close
/// first (no new requests), then `afterListenersClosed` runs (the queue finishes what it holds, so
/// open event streams and waiting requests get their `shutdown` events), then open connections
/// finish and the listeners stop.
public struct SpeakFront: Service {
    /// The listeners, all serving the same router.
    public let listeners: [SpeakListener]
    private let afterListenersClosed: @Sendable () async -> Void

    /// - Parameters:
    ///   - listeners: the listeners to run.
    ///   - afterListenersClosed: runs once every listening socket is closed during graceful shutdown.
    public init(listeners: [SpeakListener], afterListenersClosed: @escaping @Sendable () async -> Void) {
        self.listeners = listeners
        self.afterListenersClosed = afterListenersClosed
    }

    /// Waits until every listener accepts connections; returns their bound addresses.
    public func waitUntilListening() async throws -> [SpeakEndpoint] {
        var bound: [SpeakEndpoint] = []
        for listener in listeners {
            bound.append(try await listener.waitUntilListening())
        }
        return bound
    }

    public func run() async throws {
        let closing = Mutex<Task<Void, Never>?>(nil)
        let listeners = listeners
        let afterListenersClosed = afterListenersClosed
        try await withGracefulShutdownHandler {
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for listener in listeners {
                        group.addTask { try await listener.run() }
                    }
                    // The first listener that fails (a port in use) stops the others: `next()`
                    // rethrows at once, and leaving the group cancels the rest.
                    while try await group.next() != nil {}
                }
            } catch {
                // No graceful shutdown runs the step below then, yet the services that follow
                // the queue's events end only once it has shut down: without this the daemon
                // would wait out the whole shutdown timeout before exiting.
                await afterListenersClosed()
                throw error
            }
        } onGracefulShutdown: {
            closing.withLock {
                $0 = Task {
                    for listener in listeners { await listener.waitUntilClosed() }
                    await afterListenersClosed()
                }
            }
        }
        await closing.withLock { $0 }?.value
    }
}
