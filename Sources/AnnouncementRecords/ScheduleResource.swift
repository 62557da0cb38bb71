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
        var object = (try? JSONSerialization.jsonObject(with: definition.encoded())) as? [String: Any] ?? [:]
        object["id"] = id
        object["created"] = ScheduleService.text(created)
        object["updated"] = ScheduleService.text(updated)
        object["lastSlot"] = lastSlot.map(ScheduleService.text) ?? NSNull()
        object["next"] = next.map(ScheduleService.text) ?? NSNull()
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
    }

    /// `{"schedules": [...]}`.
    public static func list(_ schedules: [ScheduleResource]) -> Data {
        var data = Data(#"{"schedules":["#.utf8)
        for (index, schedule) in schedules.enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(schedule.json())
        }
        data.append(contentsOf: Array("]}".utf8))
        return data
    }
}
