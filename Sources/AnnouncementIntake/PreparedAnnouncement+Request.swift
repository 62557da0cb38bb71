import AnnouncementQueue
import SpeakAPI
import SpeechModel
import SpeechRendering

extension PreparedAnnouncement {
    /// `request` in the queue's terms, its values checked (`AnnouncementRequest.validate()`),
    /// with `speech`, its utterance as the renderer prepared it: the one place a wire request
    /// becomes what a queue takes. Its `output` is left for the intake to set, which resolves the
    /// request's output by the rules for private announcements.
    /// - Throws: `SpeechInputError` naming the field (`expiresAfter`, `repeat.count`, …).
    init(_ request: AnnouncementRequest, speech: PreparedUtterance) throws(SpeechInputError) {
        // A programming error, not a client's: checked in debug builds.
        assert(speech.utterance == request.utterance, "the prepared utterance is not the request's")
        try request.validate()
        self.init(speech: speech, delivery: request.delivery)
    }
}
