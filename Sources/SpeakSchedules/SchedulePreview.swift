import Foundation
import SpeakAPI

/// What `POST /v1/schedule-preview` answers: a schedule as it would be stored, without storing
/// it, and its next slots, so that a client can show what a rule means before saving it.
///
/// The schedule's fields are those `GET /v1/schedules/{id}` shows of its definition (`rrule` in
/// speakd's order of parts, `start` at its zone's offset), with `next`, the first slot at or
/// after now, and `slots`: up to `count` slots from now on, each as `utc` and as `local`, the
/// wall time of the schedule's zone with that zone's offset at that instant (`Z` for a one-time
/// `at`, which has no zone). Across a change to or from summer time a rule's local hour stays as
/// written and the UTC hour moves.
public struct SchedulePreview: Sendable {
    /// How many slots a preview lists when the client does not say.
    public static let defaultCount = 10
    /// The most slots a preview lists.
    public static let maxCount = 100

    /// The definition as it would be stored.
    public let definition: ScheduleDefinition
    /// The slots from now on, oldest first, at most the count asked for.
    public let slots: [Date]

    /// The preview of `definition`: its first `count` slots at or after `now`.
    public init(_ definition: ScheduleDefinition, now: Date, count: Int) {
        self.definition = definition
        let timeline = definition.timeline
        var slots: [Date] = []
        var slot = timeline.firstSlot(atOrAfter: now)
        while let found = slot, slots.count < count {
            slots.append(found)
            slot = timeline.nextSlot(after: found)
        }
        self.slots = slots
    }

    /// The offset of the schedule's zone at `date` in seconds east of UTC; 0 for a one-time schedule.
    public func offset(at date: Date) -> Int {
        guard case .recurring(_, _, let zone) = definition.timing else { return 0 }
        return zone.secondsFromGMT(for: date)
    }

    /// `date` in the schedule's wall time with its offset, as `local` gives it.
    public func local(_ date: Date) -> String { RFC3339.format(date, offset: offset(at: date)) }

    /// The JSON object.
    public func json() -> Data {
        var object = definition.jsonObject()
        object["next"] = slots.first.map { .string(ScheduleResource.text($0)) } ?? .null
        object["slots"] = .array(
            slots.map { slot in
                .object(["utc": .string(RFC3339.format(slot)), "local": .string(local(slot))])
            })
        return JSONValue.object(object).encoded()
    }
}
