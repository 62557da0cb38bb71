import SpeakAPI
import SpeechModel

/// Why the service refused a request, whichever front brought it and whatever it asked for:
/// an announcement, a control, a session, a schedule, the audit.
///
/// It carries the API's error body (`response`: a stable code, a sentence, the field in wire
/// terms) and a ``Code`` saying what kind of refusal it is. Each front maps the code to its
/// protocol once: HTTP to a status (`SpeakServer`'s `APIError`), MQTT to a `refused` report,
/// SSIP to a reply number. Switch on ``code`` (`case .queueFull:`), or match a thrown error
/// directly (`catch SpeakError.Code.notFound`).
public struct SpeakError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal, as a value that can grow new cases without breaking a `switch`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Value: String, Sendable, Hashable {
            case malformed, tooLarge, invalid, notFound, conflict, queueFull, audioUnavailable, shuttingDown
            case stateUnavailable, engineUnavailable, forbidden
        }
        fileprivate let value: Value

        /// The body is not strict JSON, or not an object of the expected shape (HTTP 400).
        public static let malformed = Code(value: .malformed)
        /// Over a size limit: the body, its text, its spans, the audio a render would hold (413).
        public static let tooLarge = Code(value: .tooLarge)
        /// A value that is well-formed but cannot be used: out of range, unknown, not allowed
        /// here (422).
        public static let invalid = Code(value: .invalid)
        /// Names something that does not exist (any more): an announcement, a session, a
        /// schedule (404).
        public static let notFound = Code(value: .notFound)
        /// Asks for what the present state cannot give: a pause of what is not speaking, nothing
        /// to repeat, a schedule id in use, the schedule limit reached (409).
        public static let conflict = Code(value: .conflict)
        /// The output's queue, or the front's share of it, is full and nothing waiting could make
        /// room (429).
        public static let queueFull = Code(value: .queueFull)
        /// The output's audio sink does not work now; a retry later may succeed (503).
        public static let audioUnavailable = Code(value: .audioUnavailable)
        /// The daemon is shutting down (503).
        public static let shuttingDown = Code(value: .shuttingDown)
        /// There is no state database (`--state-dir none`), or it cannot be read or written now (503).
        public static let stateUnavailable = Code(value: .stateUnavailable)
        /// The engine cannot answer now: its voices cannot be listed (503).
        public static let engineUnavailable = Code(value: .engineUnavailable)
        /// The daemon is not set up to allow it: a clip upload without `--clips-upload` (403).
        public static let forbidden = Code(value: .forbidden)

        public var description: String { value.rawValue }

        /// Matches a thrown error of this code, so `catch SpeakError.Code.queueFull { … }` works.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? SpeakError)?.code == code
        }
    }

    /// What kind of refusal it is.
    public let code: Code
    /// The API's error object: a stable code, a sentence, and the field in wire terms.
    public let response: ErrorResponse

    /// - Parameters:
    ///   - code: the kind of refusal.
    ///   - response: the error body the client is given.
    public init(_ code: Code, _ response: ErrorResponse) {
        self.code = code
        self.response = response
    }

    /// - Parameters:
    ///   - code: the kind of refusal.
    ///   - name: the body's stable code (`unknownSchedule`, `queueFull`, or a speech model kind).
    ///   - message: a sentence for a person.
    ///   - field: the wire-format name of the offending field.
    public init(_ code: Code, name: String, _ message: String, field: String? = nil) {
        self.init(code, ErrorResponse(code: name, message: message, field: field))
    }

    /// A body that is not a request (`AnnouncementRequest.decode(json:limits:)` and the other
    /// strict decoders): 400 when it is not strict JSON, 413 over a limit, else 422.
    public static func body(_ error: RequestBodyError) -> SpeakError {
        SpeakError(error.isMalformed ? .malformed : error.isTooLarge ? .tooLarge : .invalid, error.errorResponse)
    }

    /// A request whose text or attributes the engine cannot speak (422, the speech model's kind).
    public static func invalid(_ error: SpeechInputError) -> SpeakError {
        SpeakError(.invalid, name: error.kind, error.message, field: error.field)
    }

    /// The label of `speakd_announcements_refused_total` for this refusal.
    public var refusalReason: String {
        switch code.value {
        case .queueFull: "queue_full"
        case .shuttingDown: "shutting_down"
        case .audioUnavailable: "audio_unavailable"
        case .tooLarge: "too_large"
        case .malformed, .invalid, .notFound, .conflict, .stateUnavailable, .engineUnavailable, .forbidden:
            "invalid"
        }
    }

    public var description: String { response.description }
}
