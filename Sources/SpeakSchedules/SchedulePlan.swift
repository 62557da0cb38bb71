import Foundation

/// What the planner needs of a schedule: when its slots fall and what to do with missed ones.
/// No announcement, so the daemon keeps one of these per schedule in memory and reads the
/// announcement from the database when its slot comes.
public struct SchedulePlan: Sendable, Hashable {
    public let timing: ScheduleDefinition.Timing
    public let missed: ScheduleDefinition.MissedPolicy
    /// Whether its slots pass without being spoken.
    public let paused: Bool

    /// A plan from its parts.
    public init(timing: ScheduleDefinition.Timing, missed: ScheduleDefinition.MissedPolicy, paused: Bool = false) {
        self.timing = timing
        self.missed = missed
        self.paused = paused
    }

    /// Reads the plan from a stored definition without its announcement (the database takes
    /// it out); the keys other than the timing's, `missed` and `paused` are not read.
    public init(json: Data) throws(ScheduleError) {
        let fields = try ScheduleDefinition.Fields(json: json)
        let object = fields.values.filter { $0.value != .null }
        timing = try ScheduleDefinition.timing(object)
        missed =
            try object["missed"].map { value throws(ScheduleError) in try ScheduleDefinition.missed(value) } ?? .skip
        paused =
            try object["paused"].map { value throws(ScheduleError) in try ScheduleDefinition.paused(value) } ?? false
    }

    /// The slots of this plan on the time line.
    public var timeline: ScheduleTimeline { ScheduleTimeline(timing) }
}

extension ScheduleDefinition {
    /// The definition's timing, missed policy and pause, without its announcement.
    public var plan: SchedulePlan { SchedulePlan(timing: timing, missed: missed, paused: paused) }
}
