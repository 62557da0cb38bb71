import SpeakAPI
import SpeechModel
import SpeechRendering

/// An announcement ready for a queue: the request, its values checked, with its utterance as the
/// renderer prepared it.
///
/// The only way to make one is `init(_:speech:)`, which validates the request; so a queue takes it
/// as it is and checks nothing again. The intake (`AnnouncementIntake.prepare`) builds it once,
/// whichever front brought the request.
public struct PreparedAnnouncement: Sendable, Hashable {
    /// The request, its values in range (`AnnouncementRequest.validate()`).
    public let request: AnnouncementRequest
    /// `request.utterance`, validated and compiled by the renderer: the speaker renders it as it is.
    public let speech: PreparedUtterance
    /// Whether it gives up its waiting place to any announcement that does not (SSIP's, so a
    /// flood from an assistive client never makes a platform announcement be refused).
    public var yieldsPlace = false
    /// Where it came from: its front and sender, as the audit log records them.
    public var origin: AnnouncementOrigin?
    /// Its speech rendered ahead of time (a scheduled announcement, before its slot): the first
    /// time it is spoken plays these chunks instead of rendering; a repeat renders again.
    public var prerendered: [PCMChunk]?

    /// Checks the values of `request` that a queue interprets, and pairs it with its prepared speech.
    /// - Parameters:
    ///   - request: the announcement as a client asked for it.
    ///   - speech: `request.utterance` as the renderer prepared it (`SpeechRenderer.prepare`).
    /// - Throws: `SpeechInputError` naming the field (`expiresAfter`, `repeat.count`, …).
    public init(_ request: AnnouncementRequest, speech: PreparedUtterance) throws(SpeechInputError) {
        // A programming error, not a client's: checked in debug builds, as the queue did before.
        assert(speech.utterance == request.utterance, "the prepared utterance is not the request's")
        try request.validate()
        self.request = request
        self.speech = speech
    }
}
