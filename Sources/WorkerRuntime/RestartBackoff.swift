/// When a worker slot's replacement starts. Each slot counts its own failed starts in a row: a
/// replacement that could not be started, or a worker that died before it took any job. A worker
/// that dies after taking a job had started fine (its job crashed it, or it stalled), so its slot
/// starts counting again and its replacement starts at once: texts that crash workers in a loop
/// cost only the requests that send them, never a wait for everyone else's.
public struct RestartBackoff: Sendable, Hashable {
    /// Failed starts in a row.
    public private(set) var failures = 0

    public init() {}

    /// The slot's worker died, after taking a job or before.
    public mutating func workerDied(afterTakingAJob tookJob: Bool) {
        failures = tookJob ? 0 : failures + 1
    }

    /// A replacement for the slot could not be started.
    public mutating func startFailed() {
        failures += 1
    }

    /// The wait before the slot's next start: none after one failure, then 0.1 s doubling to 5 s.
    public var delay: Duration {
        failures <= 1 ? .zero : .milliseconds(min(5_000, 100 << min(failures - 2, 6)))
    }
}
