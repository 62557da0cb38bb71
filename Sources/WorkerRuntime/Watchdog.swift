import Synchronization

/// Runs `fire` once if `limit` passes without a `touch`, until it is stopped.
public final class Watchdog: Sendable {
    private struct State {
        var last = ContinuousClock.now
        var stopped = false
        var fired = false
    }
    private let state = Mutex(State())

    /// - Parameters:
    ///   - limit: how long it waits for a `touch`.
    ///   - fire: what it does then (kill the worker).
    public init(limit: Duration, fire: @escaping @Sendable () -> Void) {
        Task { [self] in
            while true {
                try? await Task.sleep(for: .milliseconds(200))
                let due = state.withLock { state -> Bool? in
                    if state.stopped { return nil }
                    guard ContinuousClock.now - state.last > limit else { return false }
                    state.fired = true
                    state.stopped = true
                    return true
                }
                guard let due else { return }
                if due {
                    fire()
                    return
                }
            }
        }
    }

    /// Something came: the limit runs from now.
    public func touch() {
        state.withLock { $0.last = .now }
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
