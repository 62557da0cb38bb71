import AnnouncementIntake
import SpeakAPI
import SpeakSchedules
import SpeakState

/// A refusal of a schedule or audit request: what was wrong, as the API's error body, and its
/// kind, which the server maps to a status.
public struct RecordsError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// A value the request may not have (422), naming the field.
        case invalid
        /// Malformed JSON (400).
        case malformed
        /// No schedule with that id (404).
        case notFound
        /// The id is in use (409).
        case conflict
        /// The database cannot be written or read now (503), or there is none (`--state-dir none`).
        case unavailable
    }

    public let kind: Kind
    /// The error body: code, message, field.
    public let response: ErrorResponse

    init(_ kind: Kind, code: String, _ message: String, field: String? = nil) {
        self.kind = kind
        self.response = ErrorResponse(code: code, message: message, field: field)
    }

    public var description: String { response.description }

    /// A schedule's own field is wrong.
    /// A fault inside `announcement` has the code `POST /v1/announcements` would answer.
    init(_ error: ScheduleError) {
        self.init(
            error.isMalformed ? .malformed : .invalid,
            code: error.isMalformed ? "malformedRequest" : error.announcementCode ?? "invalidValue",
            error.message, field: error.field)
    }

    /// The schedule's announcement is refused as the intake would refuse it when posted; its
    /// field is named inside `announcement`.
    init(announcement error: IntakeError) {
        let detail = error.errorResponse.error
        self.init(
            error.isMalformed ? .malformed : .invalid, code: detail.code, detail.message,
            field: "announcement" + (detail.field.map { ".\($0)" } ?? ""))
    }

    /// The database failed.
    init(state error: StateError) {
        self.init(.unavailable, code: "stateUnavailable", "\(error)")
    }

    static func unknownSchedule(_ id: String) -> RecordsError {
        RecordsError(.notFound, code: "unknownSchedule", "no schedule with id '\(id)'", field: "id")
    }
}
