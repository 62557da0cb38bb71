import AnnouncementQueue
import AudioOutput
import Logging
import SpeechModel

/// What the queue drives: the engine renders an announcement and the sink plays it.
///
/// A sink failure finishes the announcement `failed` (the queue does that when `speak` throws),
/// marks audio unavailable, and the queue then waits in `waitUntilAvailable()` while the
/// supervisor reconnects. Cancelling (interrupt, cancel, shutdown) flushes the sink at once.
public struct EngineSpeaker: AnnouncementSpeaker {
    let renderer: any SpeechRenderer
    let audio: AudioSupervisor
    let playback: AudioPlayback
    let voiceName: @Sendable (Utterance) -> String?
    let logger: Logger

    /// - Parameters:
    ///   - renderer: the engine.
    ///   - audio: the sink and its health.
    ///   - playback: how chunks are played (lead-in of silence for idle hardware).
    ///   - voiceName: the voice an utterance is spoken with, for the `finished` event.
    ///   - logger: where failures are logged.
    public init(
        renderer: any SpeechRenderer, audio: AudioSupervisor, playback: AudioPlayback = AudioPlayback(),
        voiceName: @escaping @Sendable (Utterance) -> String? = { _ in nil },
        logger: Logger = Logger(label: "speakd.speaker")
    ) {
        self.renderer = renderer
        self.audio = audio
        self.playback = playback
        self.voiceName = voiceName
        self.logger = logger
    }

    /// Renders and plays `announcement`; returns once the sink has played it all.
    public func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        guard let sink = audio.sink else {
            throw AudioUnavailable(detail: audio.status.detail)
        }
        do {
            try await playback.play(renderer.render(announcement.utterance), format: renderer.format, on: sink)
        } catch let error as AudioOutputError {
            audio.reportFailure(error)
            throw error
        }
        return SpeechOutcome(voice: voiceName(announcement.utterance))
    }

    /// Waits for the audio supervisor to have a working sink.
    public func waitUntilAvailable() async {
        await audio.waitUntilAvailable()
    }
}

/// Speaking was asked for while no sink works.
struct AudioUnavailable: Error, CustomStringConvertible {
    let detail: String?
    var description: String { "the audio sink is unavailable" + (detail.map { ": \($0)" } ?? "") }
}
