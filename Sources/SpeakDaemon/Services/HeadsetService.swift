import AnnouncementIntake
import AnnouncementQueue
import AudioOutput
import Logging
import ServiceLifecycle

/// Watches the headphones of every private output on PulseAudio (`PulseAudioHeadsetMonitor`)
/// and sends each change as a `headset` event on the event stream (and so to MQTT).
///
/// Outputs on ALSA, a WAV file or the null sink have no jack detection here: their presence
/// stays unknown, and private announcements play on them as before.
struct HeadsetService: Service {
    /// Each private output's sink and presence.
    let outputs: [(spec: AudioSinkSpec, presence: HeadsetPresence)]
    /// Where the events go.
    let events: AnnouncementOutputs
    /// The sessions, whose move to a private output and privacy wait while its headphones are out.
    let sessions: SessionBook
    /// Where `PULSE_SERVER` is read.
    let environment: [String: String]
    let logger: Logger

    func run() async throws {
        let server = environment["PULSE_SERVER"].flatMap { $0.isEmpty ? nil : $0 }
        let monitors = outputs.compactMap { output -> PulseAudioHeadsetMonitor? in
            switch output.spec {
            case .pulse:
                PulseAudioHeadsetMonitor(sinkName: nil, server: server, presence: output.presence, logger: logger)
            case .pulseSink(let name):
                PulseAudioHeadsetMonitor(sinkName: name, server: server, presence: output.presence, logger: logger)
            case .auto, .alsa, .wav, .null, .rtp:
                nil
            }
        }
        let events = events
        let sessions = sessions
        await withDiscardingTaskGroup { group in
            for output in outputs {
                let presence = output.presence
                group.addTask {
                    // The first value is the state at start, not a change: the sessions hear it, the
                    // event stream does not.
                    var isFirst = true
                    for await present in presence.changes() {
                        if !isFirst { events.publishHeadset(output: presence.output, present: present) }
                        isFirst = false
                        await sessions.headset(output: presence.output, present: present)
                    }
                }
            }
            try? await gracefulShutdown()
            for monitor in monitors { monitor.stop() }
            for output in outputs { output.presence.finish() }
        }
    }
}
