import Foundation

/// Decides, each time a schedule's runner wakes, whether to speak, pass slots over, sleep, or stop.
///
/// The runner owns the clocks and the record of the last slot; the planner is given both, so
/// every decision is a pure function of its inputs and tests pass any time they like.
///
/// - A slot is due when it is at most `lateness` old; in either mode it is spoken then. Firing a
///   slot passes over every earlier unrecorded one, so there is never a burst.
/// - On `.start`, slots that passed while the daemon was down follow the definition's
///   `MissedPolicy`: all passed over, or only the most recent spoken if within `speakWithin`.
/// - While running, slots more than `lateness` old (the wall clock stepped forward over them) are
///   passed over in one decision; the next future slot is still waited for.
/// - A paused schedule's due slot is passed (`.pass`) where it would have been spoken; missed
///   ones are still skipped as missed, and the next one is still waited for.
/// - A slot at or before `lastSlot` is never given again, whatever the wall clock says: after a
///   step backward the runner waits for the first slot after `lastSlot`.
public struct SchedulePlanner: Sendable {
    /// Why the runner is asking.
    public enum Reason: Sendable, Hashable {
        /// The daemon has just started: passed slots were missed while it was down.
        case start
        /// The runner woke from a wait or finished an announcement.
        case running
    }

    /// How late a slot may be spoken when nothing was missed: the runner's own wake-up delay.
    public static let defaultLateness: Duration = .seconds(2)

    public let timeline: ScheduleTimeline
    public let missed: ScheduleDefinition.MissedPolicy
    public let lateness: Duration
    /// Whether due slots pass without being spoken.
    public let paused: Bool

    /// A planner for one schedule.
    /// - Parameters:
    ///   - definition: the schedule; its timeline is built once here.
    ///   - lateness: how old a slot may be and still count as on time.
    public init(_ definition: ScheduleDefinition, lateness: Duration = Self.defaultLateness) {
        self.init(definition.plan, lateness: lateness)
    }

    /// A planner for one schedule's plan, as the daemon keeps it between slots.
    public init(_ plan: SchedulePlan, lateness: Duration = Self.defaultLateness) {
        timeline = plan.timeline
        missed = plan.missed
        paused = plan.paused
        self.lateness = lateness
    }

    /// The next thing to do.
    /// - Parameters:
    ///   - lastSlot: the last slot fired or skipped, as recorded by the runner; nil before the first.
    ///   - now: the wall clock.
    ///   - reason: whether the daemon just started or is running.
    public func decide(lastSlot: Date?, now: Date, reason: Reason) -> ScheduleDecision {
        let floor = lastSlot?.timeIntervalSince1970.wholeSeconds
        guard let next = timeline.next(after: floor) else { return .finished }
        let nowSeconds = now.timeIntervalSince1970
        guard Double(next) <= nowSeconds else { return .wait(until: Self.date(next)) }
        // `next` has passed, so there is a latest passed slot, at or after it.
        let latest = timeline.latest(atOrBefore: nowSeconds.wholeSeconds, after: floor) ?? next
        var window = lateness.seconds
        if reason == .start, case .speakWithin(let seconds) = missed { window = max(window, Double(seconds)) }
        guard nowSeconds - Double(latest) <= window else { return .skip(through: Self.date(latest)) }
        return paused ? .pass(slot: Self.date(latest)) : .fire(slot: Self.date(latest))
    }

    /// How long the runner sleeps on the monotonic clock before asking again: until `slot`, but
    /// no longer than `maxChunk`, so a step of the wall clock is noticed within `maxChunk`.
    ///
    /// Rounded up to the nanosecond, so the runner never wakes just before the slot and asks in vain.
    public static func sleepDuration(until slot: Date, now: Date, maxChunk: Duration) -> Duration {
        let remaining = slot.timeIntervalSince(now)
        guard remaining > 0 else { return .zero }
        guard remaining < maxChunk.seconds else { return maxChunk }
        return .nanoseconds(Int64((remaining * 1e9).rounded(.up)))
    }

    private static func date(_ seconds: Int) -> Date { Date(timeIntervalSince1970: Double(seconds)) }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
