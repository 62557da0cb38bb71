/// Suspends until a condition holds, giving up when the task is cancelled, so a test's time
/// limit ends a wait that never comes true.
///
/// - Parameters:
///   - register: under the caller's lock, returns true when the condition holds already;
///     otherwise parks the continuation, to be resumed once it holds, and returns false.
///   - release: resumes every parked continuation; called when the task is cancelled.
public func cancellableWait(
    register: (CheckedContinuation<Void, Never>) -> Bool, release: @escaping @Sendable () -> Void
) async {
    await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            if register(continuation) {
                continuation.resume()
            } else if Task.isCancelled {
                release()
            }
        }
    } onCancel: {
        release()
    }
}
