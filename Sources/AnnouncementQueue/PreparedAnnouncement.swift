import SpeakAPI
import SpeechModel
import SpeechRendering

/// An announcement ready for a queue, in the queue's own terms: its speech as the renderer
/// prepared it, and what the queue does with it (priority, interruption, expiry, chimes, repeats,
/// groups). It carries no wire request: the intake checks a request's values once and makes this
/// from it (`AnnouncementIntake.prepare`), whichever front brought it, so a queue takes it as it
/// is and checks nothing again.
public struct PreparedAnnouncement: Sendable, Hashable {
    /// What to say, validated and compiled by the renderer: the speaker renders it as it is.
    public var speech: PreparedUtterance
    /// The output whose queue takes it; nil for the default output.
    public var output: String?
    /// The outputs (zones) that all hear it at once, each once, when the request named several
    /// or a zone group (`AnnouncementOutputs.submit(_:zones:isDown:)`); nil for one output.
    public var zones: [String]?
    /// What the queue does with it: priority, interruption, expiry, chimes, repeats, groups,
    /// privacy.
    public var delivery = AnnouncementDelivery()
    /// Where it came from: its front and sender, as the audit log records them. It decides
    /// whose places it takes (`share`).
    public var origin: AnnouncementOrigin?
    /// Its speech rendered ahead of time (a scheduled announcement, before its slot): the first
    /// time it is spoken plays these chunks instead of rendering; a repeat renders again.
    public var prerendered: [PCMChunk]?

    /// Whose waiting places it takes: a schedule's slot and an SSIP message have their own
    /// share of the queue, beside the live announcements' (`QueueShare`).
    public var share: QueueShare { QueueShare(origin: origin) }

    /// - Parameters:
    ///   - speech: what to say, as the renderer prepared it.
    ///   - delivery: what the queue does with it; the rest is set after.
    public init(speech: PreparedUtterance, delivery: AnnouncementDelivery = AnnouncementDelivery()) {
        self.speech = speech
        self.delivery = delivery
    }
}
