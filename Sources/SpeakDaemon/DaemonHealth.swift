import EngineWorkers
import SpeakAPI
import SpeakFleet
import SpeakServer

/// Health as `/healthz` reports it: the engine (fixed once it started) and the audio supervisor.
struct DaemonHealth: HealthReporting {
    let engineName: String
    let audio: AudioSupervisor
    /// The engine's worker processes, when it runs in them.
    let pool: EngineWorkerPool?
    /// The MQTT fleet link, when `--mqtt` gave one; it never makes the daemon unavailable.
    var fleet: FleetLink? = nil

    func health() async -> HealthReport {
        let status = audio.status
        let workers = pool.map { pool in
            let status = pool.status
            return HealthReport.Workers(
                running: status.running, configured: status.configured, restarts: status.restarts,
                sandbox: status.sandbox)
        }
        // The engine is up while at least one worker runs; the pool keeps replacing dead ones.
        let engineUp = workers.map { $0.running > 0 } ?? true
        return HealthReport(
            engine: .init(
                state: engineUp ? .ok : .unavailable, name: engineName,
                detail: engineUp ? nil : "no engine worker is running; replacements are being started",
                workers: workers),
            audio: .init(state: status.available ? .ok : .unavailable, sink: status.sink, detail: status.detail),
            mqtt: fleet?.health ?? HealthReport.MQTT(state: .disabled))
    }
}
