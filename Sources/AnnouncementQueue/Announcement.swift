import SpeakAPI
import SpeechModel
import SpeechRendering

/// An announcement as the queue holds it.
public struct Announcement: Sendable, Hashable, Identifiable {
    public let id: String
    /// What to say, validated and compiled by the renderer where it was accepted: the speaker
    /// renders it as it is.
    public var speech: PreparedUtterance
    /// How it is delivered (priority, interruption, expiry, chimes, repeats, groups, privacy), as
    /// the request gave it and the intake checked it; the speaker knows the priorities' default
    /// chimes.
    public var delivery: AnnouncementDelivery
    /// Where it came from (`AnnouncementOrigin`): its lifecycle events carry it.
    public var origin: AnnouncementOrigin?
    /// Its speech rendered ahead of time (`PreparedAnnouncement.prerendered`), or nil.
    public var prerendered: [PCMChunk]?

    public init(
        id: String, speech: PreparedUtterance, delivery: AnnouncementDelivery = AnnouncementDelivery(),
        origin: AnnouncementOrigin? = nil, prerendered: [PCMChunk]? = nil
    ) {
        self.id = id
        self.speech = speech
        self.delivery = delivery
        self.origin = origin
        self.prerendered = prerendered
    }

    /// The utterance as the client gave it.
    public var utterance: Utterance { speech.utterance }

    /// The text as events and statuses show it: empty for a private announcement.
    public var shownText: String { delivery.isPrivate ? "" : speech.utterance.text }
}
