import Foundation
import SpeakSchedules

/// A schedule as `GET /v1/schedules/{id}` shows it: its definition's fields (`announcement`,
/// `at` or `rrule`, `start`, `timeZone`, `missed`, `name`), and `id`, `created`, `updated`,
/// `lastSlot` (the last slot that came, spoken or skipped) and `next` (the next slot, or null).
public struct ScheduleResource: Sendable {
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
        object["created"] = .string(ScheduleService.text(created))
        object["updated"] = .string(ScheduleService.text(updated))
        object["lastSlot"] = lastSlot.map { .string(ScheduleService.text($0)) } ?? .null
        object["next"] = next.map { .string(ScheduleService.text($0)) } ?? .null
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
}
