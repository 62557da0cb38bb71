import AnnouncementQueue
import ServiceLifecycle

/// Runs the announcement queue for the life of the daemon.
///
/// The front shuts the queue down once the listeners have closed; graceful shutdown here only
/// makes sure it happens when the front did not get to it. The service group counts a service
/// that returns before its own turn to shut down as a failure, so this waits for that turn.
struct QueueService: Service {
    let queue: AnnouncementQueue

    func run() async throws {
        let queue = queue
        await withGracefulShutdownHandler {
            await queue.run()
        } onGracefulShutdown: {
            Task { await queue.shutdown() }
        }
        try? await gracefulShutdown()
    }
}
