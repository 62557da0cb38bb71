import AnnouncementIntake
import AnnouncementRecords
import AudioOutput
import EngineWorkers
import SpeakAPI
import SpeakFleet
import SpeakdVersion

/// Health as `/healthz` reports it: the engine (fixed once it started) and each output's audio
/// supervisor. `audio` (and so the overall status) is the `default` output's; every output,
/// `default` too, is listed in `outputs` with its own state.
struct DaemonHealth: HealthReporting {
    let engineName: String
    /// Every output's supervisor, `default` first.
    let outputs: [(name: String, audio: AudioSupervisor)]
    /// The engine's worker processes, when it runs in them.
    let pool: EngineWorkerPool?
    /// The MQTT fleet link, when `--mqtt` gave one; it never makes the daemon unavailable.
    var fleet: FleetLink? = nil
    /// Each private output's headphone presence, by name.
    var headsets: [String: HeadsetPresence] = [:]
    /// What each RTP output has sent, by name.
    var rtp: [String: RTPStatistics] = [:]
    /// The database and its audit writer, when `--state-dir` gave one.
    var database: (path: String, audit: AuditRecorder)? = nil
    /// The named zone groups (`--zone-group`), each with its outputs.
    var zoneGroups: [String: [String]] = [:]

    func health() async -> HealthReport {
        let status = pool?.status
        let workers = status.map { status in
            HealthReport.Workers(
                running: status.running, configured: status.configured, restarts: status.restarts,
                sandbox: status.sandbox)
        }
        // The engine is up while at least one worker runs; the pool keeps replacing dead ones.
        // It is degraded while it cannot (its template does not answer, or starts fail).
        let engineUp = workers.map { $0.running > 0 } ?? true
        let problem = status?.problem
        let outputs = outputs.map { output in
            let status = output.audio.status
            var report = HealthReport.Output(
                name: output.name, state: status.available ? .ok : .unavailable, sink: status.sink,
                detail: status.detail)
            if let headset = headsets[output.name] {
                report.private = true
                report.headset = headset.present.map { $0 ? .present : .absent } ?? .unknown
            }
            if let sent = rtp[output.name] {
                report.rtp = HealthReport.Output.RTP(
                    packets: sent.packets, bytes: sent.bytes, latePackets: sent.latePackets)
                // A send error fails its announcement and the sink reopens at once; the output
                // stays degraded, saying why, until a packet goes out again.
                if report.state == .ok, let error = sent.sendError {
                    report.state = .degraded
                    report.detail = error
                }
            }
            return report
        }
        let audio = outputs[0]
        var report = HealthReport(
            engine: .init(
                state: !engineUp ? .unavailable : problem == nil ? .ok : .degraded, name: engineName,
                detail: engineUp ? problem : problem ?? "no engine worker is running; replacements are being started",
                workers: workers),
            audio: .init(state: audio.state, sink: audio.sink, detail: audio.detail),
            outputs: outputs, mqtt: fleet?.health ?? HealthReport.MQTT(state: .disabled), version: SpeakdVersion.current
        )
        report.zoneGroups = zoneGroups.sorted { $0.key < $1.key }.map { .init(name: $0.key, outputs: $0.value) }
        if let database {
            let problem = database.audit.problem
            report.database = .init(state: problem == nil ? .ok : .degraded, path: database.path, detail: problem)
        }
        return report
    }
}
