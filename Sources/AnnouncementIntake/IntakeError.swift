import AnnouncementQueue
import SpeakAPI
import SpeechModel

/// Why the intake refused an announcement, whichever front brought it.
///
/// Each front answers it in its own protocol: HTTP with a status code (`isMalformed` 400,
/// `isTooLarge` 413, `isQueueFull` 429, `isUnavailable` 503, anything else 422), MQTT with a
/// `refused` outcome; both carry `errorResponse`, the API's error object naming the field.
public struct IntakeError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case body(RequestBodyError)
        case invalid(kind: String)
        case queueFull
        case audioUnavailable
        case shuttingDown
        case notFound
        case conflict
    }

    private let code: Code
    /// The API's error object: a stable code, a sentence, and the field in wire terms.
    public let errorResponse: ErrorResponse

    private init(_ code: Code, _ response: ErrorResponse) {
        self.code = code
        self.errorResponse = response
    }

    /// A body that is not a request (`AnnouncementRequest.decode(json:limits:)`).
    public static func body(_ error: RequestBodyError) -> IntakeError {
        IntakeError(.body(error), error.errorResponse)
    }

    /// A request whose text or attributes the engine cannot speak.
    public static func invalid(_ error: SpeechInputError) -> IntakeError {
        IntakeError(
            .invalid(kind: error.kind), ErrorResponse(code: error.kind, message: error.message, field: error.field))
    }

    /// A request naming a chime, or another value, that this daemon does not have.
    static func notFound(field: String, _ message: String) -> IntakeError {
        .invalid(.notFound(field: field, message))
    }

    /// The queue's refusal: full, shutting down, an announcement it does not know (404) or that
    /// is not speaking or paused (409), or a value it rejects (`output`, `expiresAfter`). The one
    /// mapping of the queue's errors: every front maps the `IntakeError` it makes.
    static func scheduling(_ error: AnnouncementQueueError) -> IntakeError {
        if error.isQueueFull {
            return IntakeError(.queueFull, ErrorResponse(code: ErrorResponse.Code.queueFull, message: error.message))
        }
        if error.isShuttingDown {
            return IntakeError(
                .shuttingDown, ErrorResponse(code: ErrorResponse.Code.shuttingDown, message: error.message))
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
        return IntakeError(
            .invalid(kind: "invalidValue"),
            ErrorResponse(code: "invalidValue", message: error.message, field: error.field))
    }

    /// A value the request may not have here (a private announcement to a public output).
    static func invalidValue(field: String, _ message: String) -> IntakeError {
        IntakeError(.invalid(kind: "invalidValue"), ErrorResponse(code: "invalidValue", message: message, field: field))
    }

    /// An id or name that nothing answers to now: a session that ended, an announcement no
    /// output remembers (HTTP 404).
    static func unknown(field: String, code: String, _ message: String) -> IntakeError {
        IntakeError(.notFound, ErrorResponse(code: code, message: message, field: field))
    }

    /// A request that the present state cannot satisfy: nothing to repeat (HTTP 409).
    static func conflict(field: String?, code: String, _ message: String) -> IntakeError {
        IntakeError(.conflict, ErrorResponse(code: code, message: message, field: field))
    }

    /// The output's audio sink does not work now.
    static func audioUnavailable(_ detail: String?) -> IntakeError {
        IntakeError(
            .audioUnavailable,
            ErrorResponse(
                code: ErrorResponse.Code.audioUnavailable,
                message: "the audio sink is unavailable" + (detail.map { ": \($0)" } ?? "")))
    }

    /// Not strict JSON, or not an object.
    public var isMalformed: Bool {
        if case .body(let error) = code { return error.isMalformed }
        return false
    }

    /// Over a size limit: the body, its text or its spans.
    public var isTooLarge: Bool {
        if case .body(let error) = code { return error.isTooLarge }
        return false
    }

    /// The output's queue is full and nothing waiting could make room.
    public var isQueueFull: Bool { code == .queueFull }

    /// Names something that does not exist (any more): a session, a remembered announcement.
    public var isNotFound: Bool { code == .notFound }

    /// Asks for what the present state cannot give: nothing is remembered to repeat.
    public var isConflict: Bool { code == .conflict }

    /// The output's audio is down, or the daemon is shutting down: a retry later may succeed.
    public var isUnavailable: Bool { code == .audioUnavailable || code == .shuttingDown }

    /// The label of `speakd_announcements_refused_total` for this refusal.
    public var refusalReason: String {
        switch code {
        case .queueFull: "queue_full"
        case .shuttingDown: "shutting_down"
        case .audioUnavailable: "audio_unavailable"
        case .body(let error) where error.isTooLarge: "too_large"
        case .body, .invalid, .notFound, .conflict: "invalid"
        }
    }

    public var description: String { errorResponse.description }
}
