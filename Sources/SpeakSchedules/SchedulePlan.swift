import Foundation

/// What the planner needs of a schedule: when its slots fall and what to do with missed ones.
/// No announcement, so the daemon keeps one of these per schedule in memory and reads the
/// announcement from the database when its slot comes.
public struct SchedulePlan: Sendable, Hashable {
    public let timing: ScheduleDefinition.Timing
    public let missed: ScheduleDefinition.MissedPolicy

    /// A plan from its parts.
    public init(timing: ScheduleDefinition.Timing, missed: ScheduleDefinition.MissedPolicy) {
        self.timing = timing
        self.missed = missed
    }

    /// Reads the plan from a stored definition without its announcement (the database takes
    /// it out); the keys other than the timing's and `missed` are not read.
    public init(json: Data) throws(ScheduleError) {
        let fields = try ScheduleDefinition.Fields(json: json)
        let object = fields.values.filter { $0.value != .null }
        timing = try ScheduleDefinition.timing(object)
        missed =
            try object["missed"].map { value throws(ScheduleError) in try ScheduleDefinition.missed(value) } ?? .skip
    }

    /// The slots of this plan on the time line.
    public var timeline: ScheduleTimeline { ScheduleTimeline(timing) }
}

extension ScheduleDefinition {
    /// The definition's timing and missed policy, without its announcement.
    public var plan: SchedulePlan { SchedulePlan(timing: timing, missed: missed) }
}
