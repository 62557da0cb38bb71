import Synchronization

/// A one-time readiness that tasks wait for: a listener is listening, or could not listen.
///
/// `wait()` returns once `open()` was called and throws the failure once `fail(_:)` was; waiters
/// that came before either are resumed by it, in the order they came. Only the first outcome
/// counts.
public final class ReadinessLatch: Sendable {
    private struct State {
        var outcome: Result<Void, any Error>?
        var waiters: [CheckedContinuation<Void, any Error>] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Waits until the latch opens; throws the failure it was given instead.
    public func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = state.withLock { state -> Result<Void, any Error>? in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    /// Ready: every waiter, and every later one, goes on.
    public func open() { settle(.success(())) }

    /// Never ready: every waiter, and every later one, gets `failure`.
    public func fail(_ failure: any Error) { settle(.failure(failure)) }

    private func settle(_ outcome: Result<Void, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }
}
