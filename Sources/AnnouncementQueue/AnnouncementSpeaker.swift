import SpeechModel

/// Plays one announcement at a time for an `AnnouncementQueue`.
///
/// The queue never calls `speak(_:)` twice at once, and never calls it again before the previous
/// call has returned or thrown. Interrupting, cancelling and shutting down cancel the task that
/// is running `speak(_:)`; the queue knows which of those it was.
public protocol AnnouncementSpeaker: Sendable {
    /// Renders and plays `announcement`, returning once the sink has played its last sample.
    ///
    /// Throws when the engine or the sink fails; the queue finishes the announcement `failed`
    /// with the error's description as detail and calls `waitUntilAvailable()` before it
    /// starts the next one. When the calling task is cancelled it must stop promptly and
    /// discard whatever the sink has not played yet (flush), so the silence is immediate.
    /// - Parameter announcement: the announcement to speak.
    /// - Returns: what the queue reports in the `finished` event.
    func speak(_ announcement: Announcement) async throws -> SpeechOutcome

    /// Returns once speaking may succeed again after `speak(_:)` threw.
    ///
    /// The speaker owns the retry policy (reopening the sink with backoff, say). Must return
    /// promptly when the calling task is cancelled: the queue cancels it on shutdown.
    func waitUntilAvailable() async

    /// Pauses the announcement `speak(_:)` is playing, at once or at the end of the current word.
    ///
    /// While paused, `speak(_:)` does not return; cancelling it still stops it.
    /// - Returns: true once the sink is silent and the rest is kept for `resume()`; false when
    ///   nothing is playing or it ended before the point to pause at.
    func pause(atWordEnd: Bool) async -> Bool

    /// Continues a paused announcement from the sample where it stopped.
    /// - Returns: false when nothing is paused.
    func resume() -> Bool
}

extension AnnouncementSpeaker {
    /// A speaker that cannot pause.
    public func pause(atWordEnd: Bool) async -> Bool { false }

    /// A speaker that cannot pause has nothing to resume.
    public func resume() -> Bool { false }
}

/// What a speaker reports about an announcement it played to the end.
public struct SpeechOutcome: Sendable, Hashable {
    /// The voice actually used (espeak-ng identifier), reported in the `finished` event.
    public var voice: String?

    /// - Parameter voice: the voice actually used, when known.
    public init(voice: String? = nil) {
        self.voice = voice
    }
}
