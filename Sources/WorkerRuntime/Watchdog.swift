import Synchronization

/// Runs `fire` once if `limit` passes before it is stopped: a worker that is not ready in time.
public final class Watchdog: Sendable {
    private struct State {
        var stopped = false
        var fired = false
    }
    private let state = Mutex(State())

    /// - Parameters:
    ///   - limit: how long it waits to be stopped.
    ///   - fire: what it does then (kill the worker).
    public init(limit: Duration, fire: @escaping @Sendable () -> Void) {
        Task { [self] in
            try? await Task.sleep(for: limit)
            let due = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.fired = true
                state.stopped = true
                return true
            }
            if due { fire() }
        }
    }

    /// Stops watching; true when it had fired.
    @discardableResult
    public func stop() -> Bool {
        state.withLock { state in
            state.stopped = true
            return state.fired
        }
    }
}
