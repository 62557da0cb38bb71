import Synchronization

/// A clock that moves only when the test advances it.
///
/// Continuations are always resumed outside the lock: resuming takes the resumed task's lock,
/// while cancelling a task holds that lock and runs the handlers here, which take this one.
public final class ManualClock: Clock {
    public struct Instant: InstantProtocol {
        public var offset: Duration

        public func advanced(by duration: Duration) -> Self { Self(offset: offset + duration) }
        public func duration(to other: Self) -> Duration { other.offset - offset }
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UInt64: Sleeper] = [:]
        var cancelledEarly: Set<UInt64> = []
        var nextToken: UInt64 = 0
        var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many sleeps are pending.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let token = state.withLock { state in
            defer { state.nextToken += 1 }
            return state.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case cancelled, due, sleeping }
                let (outcome, waiters) = state.withLock { state -> (Outcome, [CheckedContinuation<Void, Never>]) in
                    if state.cancelledEarly.remove(token) != nil { return (.cancelled, []) }
                    if deadline <= state.now { return (.due, []) }
                    state.sleepers[token] = Sleeper(deadline: deadline, continuation: continuation)
                    let count = state.sleepers.count
                    let due = state.sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
                    state.sleeperWaiters.removeAll { $0.count <= count }
                    return (.sleeping, due)
                }
                switch outcome {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .due: continuation.resume()
                case .sleeping: break
                }
                for waiter in waiters { waiter.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state in
                let sleeper = state.sleepers.removeValue(forKey: token)
                if sleeper == nil { state.cancelledEarly.insert(token) }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Returns once at least `count` sleeps are pending; gives up when the task is cancelled.
    public func waitForSleepers(_ count: Int) async {
        await cancellableWait { continuation in
            state.withLock { state in
                guard state.sleepers.count < count else { return true }
                state.sleeperWaiters.append((count, continuation))
                return false
            }
        } release: {
            self.releaseWaiters()
        }
    }

    /// Moves time on and wakes every sleep whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for token in due.keys { state.sleepers[token] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    private func releaseWaiters() {
        let waiters = state.withLock { state in
            defer { state.sleeperWaiters = [] }
            return state.sleeperWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }
}
