/// The body of every error response: `{"error": {"code", "message", "field"}}`.
public struct ErrorResponse: Sendable, Hashable, Codable, Error, CustomStringConvertible {
    /// What went wrong, in machine- and human-readable form.
    public struct Detail: Sendable, Hashable, Codable {
        /// A stable name for the kind of problem (`outOfRange`, `queueFull`, …).
        public var code: String
        /// A sentence for a person.
        public var message: String
        /// The wire-format name of the offending field (`spans[1].pitch`), when there is one.
        public var field: String?
    }

    /// The error.
    public var error: Detail

    /// - Parameters:
    ///   - code: a stable name for the kind of problem.
    ///   - message: a sentence for a person.
    ///   - field: the wire-format name of the offending field.
    public init(code: String, message: String, field: String? = nil) {
        self.error = Detail(code: code, message: message, field: field)
    }

    public var description: String {
        if let field = error.field { return "\(field): \(error.message)" }
        return error.message
    }
}

extension ErrorResponse {
    /// Stable error codes; the 422 codes are `SpeechInputError.kind` values
    /// (`outOfRange`, `malformed`, `unsupported`, `notFound`).
    public enum Code {
        /// 400: the body is not JSON, or not the expected shape.
        public static let malformedRequest = "malformedRequest"
        /// 413: the body, the text, the number of spans or the audio `POST /v1/speech` would
        /// render is over the configured limit (`field`: `body`, `text`, `ssml` or `spans`).
        public static let tooLarge = "tooLarge"
        /// 401: a TCP request without the right bearer token (`field`: `Authorization`).
        public static let unauthorized = "unauthorized"
        /// 403: a request from a web page whose origin is not allowed (`field`: `Origin`).
        public static let forbiddenOrigin = "forbiddenOrigin"
        /// 429: too many failed sign-ins from one client address within a minute (`Retry-After` says how long to wait).
        public static let tooManySignIns = "tooManySignIns"
        /// 403: a change authorised by a session cookie without its CSRF token (`field`: `X-CSRF-Token`).
        public static let csrf = "csrf"
        /// 403: a change made with the read-only token or a session signed in with it (`field`:
        /// `Authorization` or `Cookie`).
        public static let readOnly = "readOnly"
        /// 415: a body that is not `application/json` (`field`: `Content-Type`).
        public static let unsupportedMediaType = "unsupportedMediaType"
        /// 421: a `Host` that names another service (`field`: `Host`).
        public static let misdirectedRequest = "misdirectedRequest"
        /// 404: no announcement has that id (or it left the history).
        public static let unknownAnnouncement = "unknownAnnouncement"
        /// 409: a pause of an announcement that is not speaking, or is paused or stopping already.
        public static let notSpeaking = "notSpeaking"
        /// 409: a resume of an announcement that is not paused.
        public static let notPaused = "notPaused"
        /// 404: no such route.
        public static let notFound = "notFound"
        /// 404: no output has that name (`GET /v1/outputs/{name}/sdp`).
        public static let unknownOutput = "unknownOutput"
        /// 409: the output is not an RTP stream, so it has no session description.
        public static let notRTP = "notRTP"
        /// 405: the route does not take that method.
        public static let methodNotAllowed = "methodNotAllowed"
        /// 429: the queue is full and nothing of lower priority can be displaced.
        public static let queueFull = "queueFull"
        /// 429: `POST /v1/speech` has as many renders running and waiting as it takes at once.
        public static let tooManyRenders = "tooManyRenders"
        /// 503: the audio sink is unavailable.
        public static let audioUnavailable = "audioUnavailable"
        /// 503: the service is shutting down.
        public static let shuttingDown = "shuttingDown"
        /// 500: an unexpected failure.
        public static let internalError = "internalError"
        /// 404: no session has that id, or the output has no session (it ended, or never began).
        public static let unknownSession = "unknownSession"
        /// 403: a clip upload while the daemon does not allow them (`--clips-upload`).
        public static let clipUploadsOff = "clipUploadsOff"
        /// 404: the clip library has no clip of that name (`field`: `name`).
        public static let unknownClip = "unknownClip"
        /// 409: a clip of that name exists and the upload did not ask to replace it (`field`: `name`).
        public static let clipExists = "clipExists"
        /// 422: an uploaded clip that the clip check refuses: its format, length, size or a NaN or
        /// infinite sample (`field`: `body`).
        public static let invalidClip = "invalidClip"
        /// 422: a name that is no clip name (`field`: `name`).
        public static let invalidClipName = "invalidClipName"
        /// 409: the output remembers no finished announcement to repeat.
        public static let nothingToRepeat = "nothingToRepeat"
    }
}
