import SpeakAPI

/// Reports the state of the engine and the audio sink for `/healthz`.
public protocol HealthReporting: Sendable {
    /// The current state; `queue` is filled in by the server.
    func health() async -> HealthReport
}
