import AnnouncementQueue
import ServiceLifecycle
import SpeakServer

/// Counts the events of every output's queue for `/metrics` until their shared stream ends.
struct MetricsObserver: Service {
    let metrics: SpeakMetrics
    let outputs: AnnouncementOutputs

    func run() async throws {
        await metrics.observe(outputs.events())
        // The stream ends when the last queue shuts down, before this service's turn.
        try? await gracefulShutdown()
    }
}
