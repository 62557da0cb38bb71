import Foundation

/// What a schedule's runner does next.
public enum ScheduleDecision: Sendable, Hashable {
    /// Speak now: `slot` is due. Record it as the last slot; any earlier slot not yet recorded is
    /// passed over with it.
    case fire(slot: Date)
    /// Slots up to `through` passed and are not to be spoken: record `through` as the last slot
    /// and ask again.
    case skip(through: Date)
    /// `slot` is due but the schedule is paused: record it as the last slot without speaking it
    /// (skipped, detail `paused`), and ask again.
    case pass(slot: Date)
    /// The next slot is in the future: sleep until it (see `SchedulePlanner.sleepDuration`) and ask again.
    case wait(until: Date)
    /// The schedule has no more slots.
    case finished
}
