import AnnouncementQueue
import AudioOutput
import Logging
import SpeechModel
import SpeechRendering

/// What the queue drives: the engine renders an announcement and the sink plays it.
///
/// A sink failure finishes the announcement `failed` (the queue does that when `speak` throws),
/// is reported to the supervisor, which marks audio unavailable and reopens the sink, and the
/// queue then waits in `waitUntilAvailable()`. Cancelling (interrupt, cancel, shutdown) flushes the sink at once.
public struct EngineSpeaker: AnnouncementSpeaker {
    let renderer: any SpeechRenderer
    let audio: AudioSupervisor
    let playback: AudioPlayback
    let logger: Logger

    /// - Parameters:
    ///   - renderer: the engine that prepared the announcements.
    ///   - audio: the sink and its health.
    ///   - playback: how chunks are played (lead-in of silence for idle hardware, the gap between
    ///     announcements, the engine's trailing silence left out).
    ///   - logger: where failures are logged.
    public init(
        renderer: any SpeechRenderer, audio: AudioSupervisor, playback: AudioPlayback = AudioPlayback(),
        logger: Logger = Logger(label: "speakd.speaker")
    ) {
        self.renderer = renderer
        self.audio = audio
        self.playback = playback
        self.logger = logger
    }

    /// Renders and plays `announcement` as it was prepared when accepted; returns once the sink
    /// has played it all, reporting the voice the preparation resolved.
    ///
    /// However playing ends, a sink that failed under it is reported to the supervisor: a write
    /// or drain error is thrown here, but when the announcement is cancelled or interrupted the
    /// flush that silences it may fail or time out too (a frozen sound server), and playback
    /// throws only the cancellation. The announcement's reason stays the queue's.
    public func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        guard let lease = audio.lease() else {
            throw AudioUnavailable(detail: audio.status.detail)
        }
        do {
            try await playback.play(
                renderer.render(announcement.speech), format: renderer.format,
                trailingPause: announcement.speech.trailingPause, on: lease.sink)
        } catch let error as AudioOutputError {
            audio.reportFailure(error, on: lease)
            throw error
        } catch {
            audio.checkSink(of: lease)
            throw error
        }
        audio.checkSink(of: lease)
        return SpeechOutcome(voice: announcement.speech.voice)
    }

    /// Waits for the audio supervisor to have a working sink.
    public func waitUntilAvailable() async {
        await audio.waitUntilAvailable()
    }
}

extension PreparedUtterance {
    /// The silence asked for after the last span (`pauseAfter`, an SSML `break` at the end):
    /// the engine's trailing silence is not played, so this is played in its place.
    var trailingPause: Duration {
        guard let seconds = utterance.spans.last?.pauseAfter, seconds > 0 else { return .zero }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

/// Speaking was asked for while no sink works.
struct AudioUnavailable: Error, CustomStringConvertible {
    let detail: String?
    var description: String { "the audio sink is unavailable" + (detail.map { ": \($0)" } ?? "") }
}
