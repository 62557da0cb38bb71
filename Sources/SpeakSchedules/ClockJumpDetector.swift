import Foundation

/// Tells whether the wall clock stepped (NTP, an administrator, a resumed VM) during a sleep, by
/// comparing how far it moved with how far a monotonic clock moved.
///
/// Generic over the monotonic clock's instant so that tests can pass readings of their own;
/// the daemon uses `ContinuousClock.Instant`, which keeps counting through a suspend just as the
/// wall clock does.
public struct ClockJumpDetector<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// Differences up to this are drift and rounding, not a step.
    public static var defaultTolerance: Duration { .seconds(1) }

    public let wall: Date
    public let monotonic: Instant
    public let tolerance: Duration

    /// Readings of both clocks taken together as the sleep begins.
    public init(wall: Date, monotonic: Instant, tolerance: Duration = Self.defaultTolerance) {
        self.wall = wall
        self.monotonic = monotonic
        self.tolerance = tolerance
    }

    /// How much further the wall clock moved than the monotonic clock between the two readings:
    /// positive when it stepped forward, negative when it stepped back.
    public func step(wall now: Date, monotonic instant: Instant) -> Duration {
        let wallElapsed = now.timeIntervalSince(wall)
        let elapsed = monotonic.duration(to: instant)
        return .nanoseconds(Int64(((wallElapsed - elapsed.seconds) * 1e9).rounded()))
    }

    /// True when the wall clock stepped by more than `tolerance` either way.
    public func jumped(wall now: Date, monotonic instant: Instant) -> Bool {
        let step = step(wall: now, monotonic: instant)
        return step > tolerance || step < .zero - tolerance
    }
}
