import SpeakAPI
import SpeakServer

/// Health as `/healthz` reports it: the engine (fixed once it started) and the audio supervisor.
struct DaemonHealth: HealthReporting {
    let engineName: String
    let audio: AudioSupervisor

    func health() async -> HealthReport {
        let status = audio.status
        return HealthReport(
            engine: .init(state: .ok, name: engineName),
            audio: .init(state: status.available ? .ok : .unavailable, sink: status.sink, detail: status.detail))
    }
}
