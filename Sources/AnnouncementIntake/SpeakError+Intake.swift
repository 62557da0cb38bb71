import AnnouncementQueue
import SpeakAPI
import SpeakService

/// The intake's refusals, each as the one error every front maps.
extension SpeakError {
    /// A request naming a chime, or another value, that this daemon does not have.
    static func notFound(field: String, _ message: String) -> SpeakError {
        .invalid(.notFound(field: field, message))
    }

    /// The queue's refusal: full, shutting down, an announcement it does not know (404) or that
    /// is not speaking or paused (409), or a value it rejects (`output`, `expiresAfter`). The one
    /// mapping of the queue's errors.
    static func scheduling(_ error: AnnouncementQueueError) -> SpeakError {
        if error.isQueueFull { return SpeakError(.queueFull, name: ErrorResponse.Code.queueFull, error.message) }
        if error.isShuttingDown {
            return SpeakError(.shuttingDown, name: ErrorResponse.Code.shuttingDown, error.message)
        }
        if error.isUnknownAnnouncement {
            return .unknown(field: "id", code: ErrorResponse.Code.unknownAnnouncement, error.message)
        }
        if error.isNotSpeaking {
            return .conflict(field: error.field, code: ErrorResponse.Code.notSpeaking, error.message)
        }
        if error.isNotPaused {
            return .conflict(field: error.field, code: ErrorResponse.Code.notPaused, error.message)
        }
        return SpeakError(.invalid, name: "invalidValue", error.message, field: error.field)
    }

    /// A value the request may not have here (a private announcement to a public output).
    static func invalidValue(field: String, _ message: String) -> SpeakError {
        SpeakError(.invalid, name: "invalidValue", message, field: field)
    }

    /// An id or name that nothing answers to now: a session that ended, an announcement no
    /// output remembers.
    static func unknown(field: String, code: String, _ message: String) -> SpeakError {
        SpeakError(.notFound, name: code, message, field: field)
    }

    /// A request that the present state cannot satisfy: nothing to repeat.
    static func conflict(field: String?, code: String, _ message: String) -> SpeakError {
        SpeakError(.conflict, name: code, message, field: field)
    }

    /// The output's audio sink does not work now.
    static func audioUnavailable(_ detail: String?) -> SpeakError {
        SpeakError(
            .audioUnavailable, name: ErrorResponse.Code.audioUnavailable,
            "the audio sink is unavailable" + (detail.map { ": \($0)" } ?? ""))
    }
}
