import Dispatch
import Synchronization

/// The continuous clock, whose sleeps give their timer back when they are cancelled.
///
/// `ContinuousClock`'s own sleep keeps its timer, and the memory of the job that waits on it,
/// until the deadline passes, even after the sleeping task was cancelled and has gone on. A
/// timer that is cancelled far more often than it fires (an announcement's `expiresAfter` of up
/// to a day, cancelled when it starts or is discarded) would then hold about half a kilobyte per
/// cancelled sleep for the rest of its term: a flood of such announcements grows the heap
/// without bound. Here each sleep is a dispatch timer that a cancellation cancels at once.
public struct ReleasingClock: Clock {
    public typealias Instant = ContinuousClock.Instant

    public init() {}

    public var now: Instant { .now }
    public var minimumResolution: Duration { ContinuousClock().minimumResolution }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        guard deadline > .now else { return try Task.checkCancellation() }
        let sleep = TimerSleep()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                sleep.start(continuation, after: Instant.now.duration(to: deadline), leeway: tolerance)
            }
        } onCancel: {
            sleep.cancel()
        }
    }
}

/// One sleep: its timer, and the continuation it resumes once, when the timer fires or the
/// sleep is cancelled, whichever comes first.
private final class TimerSleep: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var done = false
    }

    private let state = Mutex(State())
    /// Dispatch sources may be scheduled, activated and cancelled from any thread. Its handler
    /// runs on a serial queue of its own, which gets a thread even while the cooperative pool's
    /// are all busy (the global queue's would wait for one of them).
    private nonisolated(unsafe) let timer = DispatchSource.makeTimerSource(queue: TimerSleep.handlers)
    private static let handlers = DispatchQueue(label: "speakd.releasing-clock")

    func start(_ continuation: CheckedContinuation<Void, any Error>, after delay: Duration, leeway: Duration?) {
        timer.schedule(
            deadline: .now() + .nanoseconds(delay.wholeNanoseconds),
            leeway: .nanoseconds(leeway?.wholeNanoseconds ?? 0))
        timer.setEventHandler { [self] in finish(nil) }
        let cancelledFirst = state.withLock { state -> Bool in
            guard !state.done else { return true }
            state.continuation = continuation
            return false
        }
        // Activated whatever happened: libdispatch must never release a source that was not
        // (one cancelled first is cancelled already and fires nothing).
        timer.activate()
        if cancelledFirst { continuation.resume(throwing: CancellationError()) }
    }

    func cancel() {
        finish(CancellationError())
    }

    /// Resumes the sleeper (with `error`, if any) and cancels the timer, the first time only.
    private func finish(_ error: (any Error)?) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            state.done = true
            defer { state.continuation = nil }
            return state.continuation
        }
        timer.cancel()
        if let error {
            continuation?.resume(throwing: error)
        } else {
            continuation?.resume()
        }
    }
}

extension Duration {
    /// The duration in nanoseconds, none when negative, at most `Int.max`.
    fileprivate var wholeNanoseconds: Int {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        guard seconds < Int64.max / 1_000_000_000 - 1 else { return Int.max }
        return Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
