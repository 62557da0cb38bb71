import Foundation
import SpeakAPI
import SpeechModel

/// The properties every fuzz target checks beyond "does not crash, leak or hang".
///
/// A violated property stops the process with `fatalError`, which libFuzzer reports as a crash
/// and saves the input for: a wrong answer to untrusted input is as much a finding as a trap.
public enum FuzzChecks {
    /// Stops the run with `message` unless `condition` holds.
    public static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("fuzz property violated: \(message())") }
    }

    /// A rejection must say what is wrong and, when `fields` is given, name one of them; a
    /// field, when named, is a whole path: never empty, never ending in a bare `.`.
    public static func requireClear(_ error: SpeechInputError, field fields: Set<String>? = nil, input: String) {
        requireClear(message: error.message, field: error.field, fields: fields, shown: "\(error)", input: input)
    }

    /// The same for the refusal of a request body (`AnnouncementRequest.decode(json:limits:)`).
    public static func requireClear(_ error: RequestBodyError, field fields: Set<String>? = nil, input: String) {
        requireClear(message: error.message, field: error.field, fields: fields, shown: "\(error)", input: input)
    }

    private static func requireClear(
        message: String, field: String?, fields: Set<String>?, shown: String, input: String
    ) {
        require(!message.isEmpty, "an error without a message for \(input.debugDescription)")
        if let field {
            require(
                !field.isEmpty && !field.hasSuffix("."),
                "an error with an incomplete field for \(input.debugDescription): \(shown)")
        }
        if let fields {
            require(
                field.map(fields.contains) == true,
                "the error for \(input.debugDescription) names \(field ?? "no field"), not one of "
                    + "\(fields.sorted()): \(shown)")
        }
    }

    /// What a client sends is what the daemon decodes: `request` encoded as `speak` encodes it
    /// and decoded as `speakd` decodes it must come back unchanged, never refused.
    public static func requireWireRoundTrip(_ request: AnnouncementRequest, from input: String) {
        let body: Data
        do {
            body = try JSONEncoder().encode(request)
        } catch {
            fatalError("fuzz property violated: \(input.debugDescription) was accepted but cannot be encoded: \(error)")
        }
        let decoded: AnnouncementRequest
        do {
            decoded = try AnnouncementRequest.decode(json: body)
        } catch {
            fatalError(
                "fuzz property violated: \(input.debugDescription) was accepted, but its wire form "
                    + "\(String(decoding: body, as: UTF8.self)) is refused: \(error)")
        }
        require(
            decoded == request,
            "\(input.debugDescription) changes on the wire: \(request) became \(decoded) through "
                + String(decoding: body, as: UTF8.self))
    }
}
