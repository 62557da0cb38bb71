import SpeechModel

/// Why a schedule definition, a patch or a recurrence rule was refused.
///
/// `field` is the JSON field in wire terms (`rrule`, `timeZone`, `at`, an unknown key, or `body`
/// for a body that is not a JSON object); `message` is a sentence for the person who wrote it.
public struct ScheduleError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        /// Not JSON, or not a JSON object.
        case malformed
        /// A key the definition does not have.
        case unknownField
        /// A value of the wrong type, out of range, missing, or in conflict with another.
        case invalid
        /// Valid, but no slot is left at or after the time it was checked against.
        case noFutureSlot
    }

    private let code: Code
    /// The API's error code when the fault is inside `announcement` (`malformed`, `outOfRange`,
    /// `unsupported`, `notFound`, `tooLarge`, as `POST /v1/announcements` answers it) or a number
    /// out of range; nil for a fault in the schedule's own fields.
    public let announcementCode: String?
    /// The JSON field the error is about: `rrule`, `timeZone`, `at`, `start`, `missed`,
    /// `announcement`, `name`, an unknown key, or `body`.
    public let field: String
    /// A sentence for a person, without the field name.
    public let message: String

    private init(_ code: Code, field: String, message: String, announcementCode: String? = nil) {
        self.code = code
        self.announcementCode = announcementCode
        self.field = field
        self.message = message
    }

    /// The body is not JSON or not a JSON object.
    public var isMalformed: Bool { code == .malformed }
    /// The body names a key that a schedule does not have.
    public var isUnknownField: Bool { code == .unknownField }
    /// The definition is well formed but has no slot left: `at` is in the past, or COUNT or
    /// UNTIL ended the rule before now.
    public var hasNoFutureSlot: Bool { code == .noFutureSlot }

    public var description: String { "\(field): \(message)" }

    static func malformed(_ message: String, field: String? = nil) -> ScheduleError {
        ScheduleError(.malformed, field: field ?? "body", message: message)
    }

    /// The body is not strict JSON (`StrictJSON`): a duplicate key at any depth, a trailing
    /// comma, a lone surrogate, naming where; a number no `Double` holds is a value out of range.
    static func strict(_ error: StrictJSONError) -> ScheduleError {
        if error.isOutOfRange, let field = error.field {
            return ScheduleError(.invalid, field: field, message: error.message, announcementCode: "outOfRange")
        }
        return .malformed(error.message, field: error.field)
    }

    /// The announcement is refused as `POST /v1/announcements` would refuse it; its field is
    /// named inside `announcement`.
    static func announcement(_ error: SpeechInputError) -> ScheduleError {
        ScheduleError(
            .invalid, field: "announcement" + (error.field.map { ".\($0)" } ?? ""), message: error.message,
            announcementCode: error.kind)
    }

    static func unknownField(_ key: String, known: [String]) -> ScheduleError {
        ScheduleError(
            .unknownField, field: key,
            message: "unknown field '\(key)' (a schedule has \(known.joined(separator: ", ")))")
    }

    static func invalid(_ field: String, _ message: String) -> ScheduleError {
        ScheduleError(.invalid, field: field, message: message)
    }

    static func rule(_ message: String) -> ScheduleError {
        ScheduleError(.invalid, field: "rrule", message: message)
    }

    static func noFutureSlot(_ field: String, _ message: String) -> ScheduleError {
        ScheduleError(.noFutureSlot, field: field, message: message)
    }
}
