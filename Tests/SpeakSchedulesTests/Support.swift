import Foundation
import SpeakSchedules

/// An RFC 3339 instant written in a test; a typo is a programming error.
func instant(_ text: String) -> Date {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    guard let date = formatter.date(from: text) else { fatalError("not RFC 3339: \(text)") }
    return date
}

/// A recurring definition with a trivial announcement.
func recurring(
    _ rule: String, start: String, zone: String, missed: String = #""skip""#
) throws -> ScheduleDefinition {
    let body = """
        {"announcement": {"text": "Closing soon"}, "rrule": "\(rule)", "start": "\(start)", \
        "timeZone": "\(zone)", "missed": \(missed)}
        """
    return try ScheduleDefinition(json: Data(body.utf8))
}

/// The first `count` slots of a definition, from its start.
func firstSlots(_ definition: ScheduleDefinition, _ count: Int) -> [Date] {
    var slots: [Date] = []
    var last: Date?
    let timeline = definition.timeline
    while slots.count < count {
        guard let next = last.map({ timeline.nextSlot(after: $0) }) ?? timeline.firstSlot else { break }
        slots.append(next)
        last = next
    }
    return slots
}
