import Foundation
import SpeakAPI
import SpeakSchedules
import SpeakService
import SpeechModel

/// A fleet's schedule command (`speakd/{site}/…/schedule`), decoded strictly:
/// `{"action": "add", "schedule": {…}}`, `{"action": "update", "id": ID, "patch": {…}}` or
/// `{"action": "delete", "id": ID}`. Any other key, or a missing one, is refused by name, and so
/// is a key given twice at any depth (`schedule.announcement.private`), as in an HTTP body.
public enum ScheduleCommand: Sendable, Equatable {
    /// A `POST /v1/schedules` body.
    case add(Data)
    /// A `PATCH /v1/schedules/{id}` body.
    case update(id: String, patch: Data)
    case delete(id: String)

    /// - Throws: `SpeakError` naming the field.
    public init(json: Data) throws(SpeakError) {
        do {
            try StrictJSON.check(json)
        } catch {
            throw SpeakError(
                error.isOutOfRange ? .invalid : .malformed,
                name: error.isOutOfRange ? "outOfRange" : "malformedRequest", error.message,
                field: error.field ?? "body")
        }
        guard case .object(let object)? = try? WireFormat.decoder().decode(JSONValue.self, from: json) else {
            throw SpeakError(.malformed, name: "malformedRequest", "the command is not a JSON object", field: "body")
        }
        guard case .string(let action)? = object["action"] else {
            throw SpeakError(.invalid, name: "invalidValue", "action must be add, update or delete", field: "action")
        }
        let allowed: Set<String>
        switch action {
        case "add": allowed = ["action", "schedule"]
        case "update": allowed = ["action", "id", "patch"]
        case "delete": allowed = ["action", "id"]
        default:
            throw SpeakError(
                .invalid, name: "invalidValue", "action must be add, update or delete, not '\(action)'",
                field: "action")
        }
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw SpeakError(
                .invalid, name: "invalidValue", "\(action) takes \(allowed.sorted().joined(separator: ", "))",
                field: unknown)
        }
        func body(_ key: String) throws(SpeakError) -> Data {
            guard let value = object[key], case .object = value else {
                throw SpeakError(.invalid, name: "invalidValue", "\(key) must be a JSON object", field: key)
            }
            return value.encoded()
        }
        func id() throws(SpeakError) -> String {
            guard case .string(let id)? = object["id"], !id.isEmpty else {
                throw SpeakError(.invalid, name: "invalidValue", "id must be a schedule's id", field: "id")
            }
            return id
        }
        switch action {
        case "add": self = .add(try body("schedule"))
        case "update": self = .update(id: try id(), patch: try body("patch"))
        default: self = .delete(id: try id())
        }
    }
}
