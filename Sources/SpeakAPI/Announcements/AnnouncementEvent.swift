import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// How urgently an announcement wants to be heard.
public enum AnnouncementPriority: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case low
    case `default`
    case high

    private var rank: Int {
        switch self {
        case .low: 0
        case .default: 1
        case .high: 2
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// Why an announcement finished.
public enum FinishReason: String, Sendable, Hashable, Codable, CaseIterable {
    /// All of its audio was played out by the sink.
    case completed
    /// A more urgent announcement took over while it was speaking.
    case interrupted
    /// Cancelled by a client.
    case cancelled
    /// `expiresAfter` passed before it started.
    case expired
    /// Displaced from a full queue by a more urgent announcement, replaced by a newer one of its
    /// `replaceGroup`, or dropped by `dropIfBusy` on a busy queue.
    case discarded
    /// The engine or the audio sink failed.
    case failed
    /// The service shut down.
    case shutdown
}

/// A range of an announcement's `text` in UTF-16 code units, like `NSRange`.
public struct TextRange: Sendable, Hashable, Codable {
    public var location: Int
    public var length: Int

    public init(location: Int, length: Int) {
        self.location = location
        self.length = length
    }
}

/// Something that happened to an announcement: `queued`, `started`, `paused`, `resumed`, `finished`; and while it is
/// heard, `word`, `sentence` and `mark` (progress events), each sent when the sink plays its
/// first sample.
public struct AnnouncementEvent: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case queued
        case started
        /// The speaking announcement fell silent on a pause request.
        case paused
        /// A paused announcement continues from where it stopped.
        case resumed
        case finished
        /// A word starts being heard; `range` and `word` say which.
        case word
        /// A sentence starts being heard; `range` says which.
        case sentence
        /// A mark (SSML `<mark name>`, a span's `mark`) is reached; `name` says which.
        case mark
        /// A recorded clip (a `{"clip": "NAME"}` span) starts being heard; `name` says which.
        case clip
        /// Headphones were plugged into (`present` true) or pulled out of (false) the private
        /// `output`; no announcement's: `id` and `text` are empty (docs/privacy.md).
        case headset
        /// An output's session started, changed or ended: `id` is the session's, `text` is
        /// empty, and `session` says what happened.
        case session
        /// A repeat was queued: `id` is the new announcement, `repeatOf` the original.
        case `repeat`
        /// A schedule was created, changed or deleted, or one of its slots came: `id` is the
        /// schedule's, `text` is empty, and `schedule` says what happened.
        case schedule

        /// Whether it reports progress through the speech rather than a change of state.
        public var isProgress: Bool { self == .word || self == .sentence || self == .mark || self == .clip }

        /// Apple's name (`AVSpeechSynthesizerDelegate`) for `paused`.
        public static var didPause: Self { .paused }
        /// Apple's name for `resumed`.
        public static var didContinue: Self { .resumed }
    }

    public var type: Kind
    public var id: String
    /// The plain string of the announcement.
    public var text: String
    public var priority: AnnouncementPriority
    /// When it happened; on the wire ISO 8601 in UTC with milliseconds (`2026-11-21T11:34:10.123Z`).
    @WireTimestamp public var timestamp: Date
    /// Set on `finished` only: true when all of its audio was played out.
    public var success: Bool?
    /// Set on `finished` only.
    public var reason: FinishReason?
    /// The voice actually used, when known.
    public var voice: String?
    /// A human-readable detail, e.g. why an announcement failed.
    public var detail: String?
    /// Progress events: the part of `text` being heard (UTF-16 location and length).
    public var range: TextRange?
    /// `word` events: the word, `text` at `range`.
    public var word: String?
    /// `mark` and `clip` events: the mark's or the clip's name.
    public var name: String?
    /// The named output whose queue holds the announcement (`default` unless the request named another).
    public var output: String?
    /// `finished` of an announcement heard in several outputs (zones): each zone's outcome, in
    /// the order the request named them; nil for an announcement of one output.
    public var outputs: [ZoneOutcome]?
    /// `headset` events: whether headphones are plugged in now; absent when the sink no longer says.
    public var present: Bool?
    /// `repeat` events: the id of the announcement repeated.
    public var repeatOf: String?
    /// `session` events: the change and the session.
    public var session: SessionChange?
    /// `schedule` events: what happened to the schedule.
    public var schedule: ScheduleChange?
    /// Where the announcement came from; inside the daemon only, never on the wire.
    public var origin: AnnouncementOrigin?
    /// Whether the announcement is private (its `text` is empty); inside the daemon only.
    public var isPrivate = false

    public init(
        type: Kind, id: String, text: String, priority: AnnouncementPriority, timestamp: Date,
        success: Bool? = nil, reason: FinishReason? = nil, voice: String? = nil, detail: String? = nil,
        range: TextRange? = nil, word: String? = nil, name: String? = nil, output: String? = nil
    ) {
        self.type = type
        self.id = id
        self.text = text
        self.priority = priority
        self.timestamp = timestamp
        self.success = success
        self.reason = reason
        self.voice = voice
        self.detail = detail
        self.range = range
        self.word = word
        self.name = name
        self.output = output
    }
}

extension AnnouncementEvent {
    private enum CodingKeys: String, CodingKey {
        case type, id, text, priority, timestamp, success, reason, voice, detail, range, word, name, output
        case present, repeatOf, session, schedule, outputs
    }
}

/// How an announcement heard in several outputs ended in one of them: an entry of
/// `finished.outputs`.
public struct ZoneOutcome: Sendable, Hashable, Codable {
    /// The output (zone).
    public var output: String
    /// Why it ended there: `completed` when that zone heard it to the end.
    public var reason: FinishReason
    /// Why it failed or stopped there, when known.
    public var detail: String?

    /// - Parameters: see the properties of the same names.
    public init(output: String, reason: FinishReason, detail: String? = nil) {
        self.output = output
        self.reason = reason
        self.detail = detail
    }
}
