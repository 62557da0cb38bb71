import AnnouncementQueue
import PosixSupport
import ServiceLifecycle
import Synchronization

/// Hands back what an idle daemon holds but does not use: the heap that malloc holds free, and
/// the mappings of the daemon's code and its libraries' (`CodePages`), which starting and
/// speaking leave mapped far beyond what an idle daemon runs. Once `settle` after the start
/// (start-up's last parts, the sound server's connection and the loudness warm-up, are done by
/// then) unless an announcement came first, and then whenever the outputs have been quiet for
/// `quiet` (`--idle-release`) after announcements.
///
/// The next announcement maps the code it runs again with minor faults, about 0.6 ms before its
/// first sample (docs/performance.md, "The plain release build was over"), so `quiet` is long enough that announcements
/// in a burst never pay it. A timer runs only after an event, so an idle daemon is never woken
/// for this. One timer serves a whole burst: an event only moves the instant it waits for, so
/// thousands of posts a second start no task and no timer each (a cancelled `Task.sleep` keeps
/// its timer, and the task's memory with it, until its deadline would have passed).
struct IdleRelease: Service {
    let outputs: AnnouncementOutputs
    let quiet: Duration
    /// How long after the start the first release waits.
    static let settle = Duration.seconds(3)

    func run() async throws {
        let deadline = QuietDeadline(.now + min(Self.settle, quiet))
        var timer: Task<Void, Never>? = releaseWhenQuiet(deadline)
        for await _ in outputs.events() {
            if deadline.move(to: .now + quiet) { timer = releaseWhenQuiet(deadline) }
        }
        timer?.cancel()
        // The stream ends when the last queue shuts down, before this service's turn.
        try? await gracefulShutdown()
    }

    /// Waits until `deadline` has passed without moving, then releases, unless cancelled first
    /// or an announcement is still queued or speaking then (its `finished` starts the wait again).
    private func releaseWhenQuiet(_ deadline: QuietDeadline) -> Task<Void, Never> {
        Task { [outputs] in
            while let instant = deadline.ahead() {
                guard (try? await Task.sleep(until: instant, clock: .continuous)) != nil else { return }
            }
            guard await outputs.snapshot().isEmpty else { return }
            Malloc.releaseFreePages()
            CodePages.release()
        }
    }
}

/// When the outputs will have been quiet long enough, and whether a timer waits for it.
private final class QuietDeadline: Sendable {
    private let state: Mutex<(instant: ContinuousClock.Instant, waited: Bool)>

    /// A deadline at `instant`, which the caller starts a timer for.
    init(_ instant: ContinuousClock.Instant) {
        state = Mutex((instant, true))
    }

    /// Moves the deadline to `instant`; true when no timer waits for it any more, so the caller
    /// starts one.
    func move(to instant: ContinuousClock.Instant) -> Bool {
        state.withLock { state in
            state.instant = instant
            defer { state.waited = true }
            return !state.waited
        }
    }

    /// The deadline while it is ahead; nil once it has passed, and then no timer waits for it.
    func ahead() -> ContinuousClock.Instant? {
        state.withLock { state in
            guard state.instant <= .now else { return state.instant }
            state.waited = false
            return nil
        }
    }
}
