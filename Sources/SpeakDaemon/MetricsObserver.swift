import AnnouncementQueue
import ServiceLifecycle
import SpeakServer

/// Counts queue events for `/metrics` until the queue's event stream ends.
struct MetricsObserver: Service {
    let metrics: SpeakMetrics
    let queue: AnnouncementQueue

    func run() async throws {
        await metrics.observe(queue.events())
        // The stream ends when the queue shuts down, before this service's turn.
        try? await gracefulShutdown()
    }
}
