import Synchronization

/// A clock that moves only when the test advances it.
final class ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Self { Self(offset: offset + duration) }
        func duration(to other: Self) -> Duration { other.offset - offset }
        static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
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

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// How many sleeps are pending.
    var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let token = state.withLock { state in
            defer { state.nextToken += 1 }
            return state.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                state.withLock { state in
                    if state.cancelledEarly.remove(token) != nil {
                        continuation.resume(throwing: CancellationError())
                    } else if deadline <= state.now {
                        continuation.resume()
                    } else {
                        state.sleepers[token] = Sleeper(deadline: deadline, continuation: continuation)
                        let count = state.sleepers.count
                        state.sleeperWaiters.removeAll { waiter in
                            guard waiter.count <= count else { return false }
                            waiter.continuation.resume()
                            return true
                        }
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                if let sleeper = state.sleepers.removeValue(forKey: token) {
                    sleeper.continuation.resume(throwing: CancellationError())
                } else {
                    state.cancelledEarly.insert(token)
                }
            }
        }
    }

    /// Returns once at least `count` sleeps are pending.
    func waitForSleepers(_ count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.sleepers.count >= count {
                    continuation.resume()
                } else {
                    state.sleeperWaiters.append((count, continuation))
                }
            }
        }
    }

    /// Moves time on and wakes every sleep whose deadline has come.
    func advance(by duration: Duration) {
        state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            for (token, sleeper) in state.sleepers where sleeper.deadline <= now {
                state.sleepers[token] = nil
                sleeper.continuation.resume()
            }
        }
    }
}
