import AnnouncementQueue
import Logging
import ServiceLifecycle
import SpeakServer

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

/// Counts queue events for `/metrics` until the queue's event stream ends.
struct MetricsObserver: Service {
    let metrics: SpeakMetrics
    let queue: AnnouncementQueue

    func run() async throws {
        await metrics.observe(await queue.eventStream(after: nil))
        // The stream ends when the queue shuts down, before this service's turn.
        try? await gracefulShutdown()
    }
}

/// Tells systemd `READY=1` once every listener accepts connections, and `STOPPING=1` when
/// graceful shutdown begins.
struct SystemdReadiness: Service {
    let front: SpeakFront
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        let addresses = try await front.waitUntilListening()
        send("READY=1\nSTATUS=listening on \(addresses.map(\.description).joined(separator: ", "))")
        try? await gracefulShutdown()
        send("STOPPING=1")
    }

    private func send(_ message: String) {
        do {
            try notifier.notify(message)
        } catch {
            logger.warning("systemd notification failed", metadata: ["speakd.error": "\(error)"])
        }
    }
}
