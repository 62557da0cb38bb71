import SpeakAPI
import SpeechModel
import SpeechRendering

/// An announcement as the queue holds it.
public struct Announcement: Sendable, Hashable, Identifiable {
    public let id: String
    /// What to say, validated and compiled by the renderer where it was accepted: the speaker
    /// renders it as it is.
    public var speech: PreparedUtterance
    public var priority: AnnouncementPriority
    /// `false` is Apple's interrupting announcement: it interrupts a lower or equal
    /// (non-high) announcement that is speaking.
    public var queue: Bool
    /// Seconds it may wait before it starts; nil waits for ever.
    public var expiresAfter: Double?
    /// The chime before the speech; the speaker knows the priorities' defaults.
    public var chime: ChimeChoice = .priorityDefault
    /// The chime after the speech; the speaker knows the priorities' defaults.
    public var chimeAfter: ChimeChoice = .priorityDefault
    /// How many times it is spoken as this one announcement; nil once.
    public var `repeat`: AnnouncementRepeat?
    /// Announcements of the same group replace one another: the newest accepted finishes the
    /// others `discarded`.
    public var replaceGroup: String?
    /// A private announcement (`"private": true`): its text leaves the queue in no event or
    /// status, only to the holder of `key`.
    public var isPrivate = false
    /// Where it came from (`AnnouncementOrigin`): its lifecycle events carry it.
    public var origin: AnnouncementOrigin?
    /// Its speech rendered ahead of time (`PreparedAnnouncement.prerendered`), or nil.
    public var prerendered: [PCMChunk]?

    public init(
        id: String, speech: PreparedUtterance, priority: AnnouncementPriority = .default,
        queue: Bool = true, expiresAfter: Double? = nil
    ) {
        self.id = id
        self.speech = speech
        self.priority = priority
        self.queue = queue
        self.expiresAfter = expiresAfter
    }

    /// The utterance as the client gave it.
    public var utterance: Utterance { speech.utterance }

    /// The text as events and statuses show it: empty for a private announcement.
    public var shownText: String { isPrivate ? "" : speech.utterance.text }
}
