import Foundation
import SpeakAPI

/// A schedule as `GET /v1/schedules/{id}` shows it: its definition's fields (`announcement`,
/// `at` or `rrule`, `start`, `timeZone`, `missed`, `paused`, `name`), and `id`, `created`, `updated`,
/// `lastSlot` (the last slot that came, spoken or skipped) and `next` (the next slot, or null).
public struct ScheduleResource: Sendable {
    /// - Parameters: see the properties of the same names.
    public init(
        id: String, definition: ScheduleDefinition, created: Date, updated: Date, lastSlot: Date?, next: Date?
    ) {
        self.id = id
        self.definition = definition
        self.created = created
        self.updated = updated
        self.lastSlot = lastSlot
        self.next = next
    }

    public var id: String
    public var definition: ScheduleDefinition
    public var created: Date
    public var updated: Date
    public var lastSlot: Date?
    public var next: Date?

    /// The JSON object.
    public func json() -> Data {
        var object = definition.jsonObject()
        object["id"] = .string(id)
        object["created"] = .string(Self.text(created))
        object["updated"] = .string(Self.text(updated))
        object["lastSlot"] = lastSlot.map { .string(Self.text($0)) } ?? .null
        object["next"] = next.map { .string(Self.text($0)) } ?? .null
        return JSONValue.object(object).encoded()
    }

    /// `{"schedules": [...]}`, with `"next"`, the cursor of the next page, when there is one.
    public static func list(_ schedules: [ScheduleResource], next: String? = nil) -> Data {
        var data = Data(#"{"schedules":["#.utf8)
        for (index, schedule) in schedules.enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(schedule.json())
        }
        data.append(UInt8(ascii: "]"))
        if let next {
            data.append(contentsOf: Array(#","next":"#.utf8))
            data.append(JSONValue.string(next).encoded())
        }
        data.append(UInt8(ascii: "}"))
        return data
    }

    /// A time as the schedule's JSON gives it: ISO 8601 in UTC, with fractional seconds.
    public static func text(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
