import FoundationEssentials
import SpeechModel

/// Why a request body is not an announcement request: not strict JSON or not an object (HTTP
/// 400), over a size limit (413), or a value that cannot be spoken (422).
///
/// Every front answers it in its own protocol; `errorResponse` is the API's error object.
public struct RequestBodyError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case malformed
        case tooLarge
        case invalid(kind: String)
    }

    private let code: Code
    /// The offending field in wire terms (`spans[1].pitch`, `body`), or nil for the whole body.
    public let field: String?
    /// A sentence for a person.
    public let message: String

    private init(_ code: Code, _ message: String, field: String?) {
        self.code = code
        self.message = message
        self.field = field
    }

    /// Not JSON, not strict JSON, or not an object.
    public static func malformed(_ message: String, field: String? = nil) -> RequestBodyError {
        RequestBodyError(.malformed, message, field: field)
    }

    /// Over a size limit: the body's bytes, its characters or its spans.
    public static func tooLarge(_ message: String, field: String) -> RequestBodyError {
        RequestBodyError(.tooLarge, message, field: field)
    }

    /// A well-formed body with a value that cannot be spoken.
    public static func invalid(_ error: SpeechInputError) -> RequestBodyError {
        RequestBodyError(.invalid(kind: error.kind), error.message, field: error.field)
    }

    /// The body is not strict JSON or not an object (HTTP 400).
    public var isMalformed: Bool { code == .malformed }
    /// The body is over a size limit (HTTP 413).
    public var isTooLarge: Bool { code == .tooLarge }

    /// The API's error object: `malformedRequest`, `tooLarge`, or the speech model's kind
    /// (`malformed`, `outOfRange`, `unsupported`, `notFound`).
    public var errorResponse: ErrorResponse {
        switch code {
        case .malformed: ErrorResponse(code: ErrorResponse.Code.malformedRequest, message: message, field: field)
        case .tooLarge: ErrorResponse(code: ErrorResponse.Code.tooLarge, message: message, field: field)
        case .invalid(let kind): ErrorResponse(code: kind, message: message, field: field)
        }
    }

    public var description: String {
        if let field { return "\(field): \(message)" }
        return message
    }
}

extension RequestBodyError {
    /// Checks that `json` is strict JSON (`StrictJSON.check`) and decodes a `T` from it, mapping
    /// every failure to the error a front answers: a malformed body (400), or a value the type
    /// refuses (422, naming the field).
    /// - Returns: the value, and the keys the body has at its top level.
    static func decodeStrictly<T: Decodable>(
        _ type: T.Type, from json: Data
    ) throws(RequestBodyError) -> (value: T, keys: [String]) {
        let keys: [String]
        do {
            keys = try StrictJSON.check(json)
        } catch {
            if error.isOutOfRange, let field = error.field { throw .invalid(.outOfRange(field: field, error.message)) }
            throw .malformed(error.message, field: error.field)
        }
        do {
            return (try WireFormat.decoder().decode(T.self, from: json), keys)
        } catch let error as SpeechInputError {
            throw .invalid(error)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw .malformed("the body is not valid JSON: \(context.debugDescription)")
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw .malformed("the body must be a JSON object", field: "body")
        } catch DecodingError.valueNotFound(_, let context) where context.codingPath.isEmpty {
            // A top-level `null`: the same shape error as any other body that is not an object.
            throw .malformed("the body must be a JSON object, not null", field: "body")
        } catch let error as DecodingError {
            // An unknown priority, say, is a `SpeechInputError` from the type itself.
            throw .invalid(SpeechInputError.from(error))
        } catch {
            throw .malformed("the body could not be read: \(error)")
        }
    }
}
