import FoundationEssentials
import SpeakAPI
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

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

    /// `speak(_:)`, telling `listener` what is heard while it plays: its first audible sample,
    /// each word, sentence and mark as the sink plays its first sample, the first sample, the
    /// end of the last sound.
    /// Every progress report is made before this returns or throws. A speaker that cannot tell
    /// plays without reporting (the default).
    func speak(_ announcement: Announcement, listener: SpeechListener) async throws -> SpeechOutcome

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

extension AnnouncementSpeaker {
    /// A speaker that cannot tell when it is heard is taken to be heard from its start.
    public func speak(_ announcement: Announcement, listener: SpeechListener) async throws -> SpeechOutcome {
        listener.firstSound(.now)
        return try await speak(announcement)
    }
}

/// A word, sentence or mark of an announcement, heard now (at `heardAt`).
public struct SpeechProgress: Sendable, Hashable {
    /// `word`, `sentence` or `mark`.
    public var kind: AnnouncementEvent.Kind
    /// The part of the announcement's text (UTF-16), when the speaker can tell.
    public var range: TextRange?
    /// The word, for `word`.
    public var word: String?
    /// The name, for `mark`.
    public var name: String?
    /// When its sample is heard (the sink's estimate), when the speaker can tell; the event's
    /// `timestamp`. Nil is now.
    public var heardAt: ContinuousClock.Instant?

    /// - Parameters: see the properties of the same names.
    public init(
        kind: AnnouncementEvent.Kind, range: TextRange? = nil, word: String? = nil, name: String? = nil,
        heardAt: ContinuousClock.Instant? = nil
    ) {
        self.kind = kind
        self.range = range
        self.word = word
        self.name = name
        self.heardAt = heardAt
    }
}

/// What wants to hear about an announcement while it is played. The queue makes one for each
/// announcement it hands to its speaker.
public struct SpeechListener: Sendable {
    /// Whether anybody wants progress now: a speaker need not map or report it when not.
    public var wantsProgress: @Sendable () -> Bool = { true }
    /// A word, sentence or mark, called as it is heard.
    public var progress: @Sendable (SpeechProgress) -> Void = { _ in }
    /// When the first sample is heard (the sink's estimate), called once.
    public var firstSample: @Sendable (ContinuousClock.Instant) -> Void = { _ in }
    /// When the last sound ended, called once when played to the end.
    public var lastSound: @Sendable (ContinuousClock.Instant) -> Void = { _ in }
    /// Called as the first audible sample is heard (the announcement's `started`), with the
    /// instant it is heard (the sink's estimate; the call comes a little after); a speaker may
    /// call it more than once (each repeat), and only the first call counts.
    public var firstSound: @Sendable (ContinuousClock.Instant) -> Void = { _ in }
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
