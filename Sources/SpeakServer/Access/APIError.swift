import FoundationEssentials
import HTTPTypes
import Hummingbird
import SpeakAPI
import SpeakService
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// An error the API reports to its client: an HTTP status and the JSON error body.
///
/// Every failure a route can meet is mapped here, so the status codes of the DESIGN live in one place.
public struct APIError: HTTPResponseError, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// The JSON body.
    public let body: ErrorResponse
    /// Headers the answer carries beside the body (`Allow` on a 405).
    public let headers: HTTPFields

    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - code: a stable name for the kind of problem.
    ///   - message: a sentence for a person.
    ///   - field: the wire-format name of the offending field.
    ///   - headers: headers the answer carries beside the body.
    public init(
        status: HTTPResponse.Status, code: String, message: String, field: String? = nil, headers: HTTPFields = [:]
    ) {
        self.status = status
        self.body = ErrorResponse(code: code, message: message, field: field)
        self.headers = headers
    }

    public var description: String { "\(status.code) \(body)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let data = (try? WireFormat.encoder().encode(body)) ?? Data()
        var headers = headers
        headers[.contentType] = WireFormat.jsonContentType
        if status == .tooManyRequests, headers[.retryAfter] == nil { headers[.retryAfter] = "1" }
        if status == .unauthorized { headers[.wwwAuthenticate] = #"Bearer realm="speakd""# }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// 400: the body is not valid JSON or not an object of the expected shape.
    static func malformed(_ message: String, field: String? = nil) -> APIError {
        APIError(status: .badRequest, code: ErrorResponse.Code.malformedRequest, message: message, field: field)
    }

    /// 413: over a configured limit.
    static func tooLarge(_ message: String, field: String? = nil) -> APIError {
        APIError(status: .contentTooLarge, code: ErrorResponse.Code.tooLarge, message: message, field: field)
    }

    /// 401: a TCP request without the right bearer token; the response asks for one.
    static func unauthorized(_ message: String, field: String = "Authorization") -> APIError {
        APIError(status: .unauthorized, code: ErrorResponse.Code.unauthorized, message: message, field: field)
    }

    /// 403: a change authorised by a session cookie without the session's CSRF token.
    static func csrf(_ message: String) -> APIError {
        APIError(status: .forbidden, code: ErrorResponse.Code.csrf, message: message, field: "X-CSRF-Token")
    }

    /// 403: a request from a web page whose origin is not allowed.
    static func forbiddenOrigin(_ message: String) -> APIError {
        APIError(status: .forbidden, code: ErrorResponse.Code.forbiddenOrigin, message: message, field: "Origin")
    }

    /// 415: a body that is not declared `application/json`.
    static func unsupportedMediaType(_ message: String) -> APIError {
        APIError(
            status: .unsupportedMediaType, code: ErrorResponse.Code.unsupportedMediaType, message: message,
            field: "Content-Type")
    }

    /// 421: a request whose `Host` names another service (a rebound DNS name).
    static func misdirected(_ message: String) -> APIError {
        APIError(
            status: .misdirectedRequest, code: ErrorResponse.Code.misdirectedRequest, message: message, field: "Host")
    }

    /// 422: a value that is well-formed JSON but cannot be spoken.
    static func invalid(_ error: SpeechInputError) -> APIError {
        APIError(status: .unprocessableContent, code: error.kind, message: error.message, field: error.field)
    }

    /// The service's refusal in HTTP: the one place a ``SpeakError/Code`` becomes a status.
    init(_ error: SpeakError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .malformed: .badRequest
            case .tooLarge: .contentTooLarge
            case .notFound: .notFound
            case .conflict: .conflict
            case .queueFull: .tooManyRequests
            case .forbidden: .forbidden
            case .audioUnavailable, .shuttingDown, .stateUnavailable, .engineUnavailable: .serviceUnavailable
            default: .unprocessableContent
            }
        self.init(status: status, body: error.response)
    }

    private init(status: HTTPResponse.Status, body: ErrorResponse) {
        self.status = status
        self.body = body
        self.headers = [:]
    }
}
