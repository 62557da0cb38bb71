import Synchronization

/// Pauses and resumes the stream an `AudioPlayback` is playing, from outside the task playing it.
///
/// Shared by copies of the playback (the daemon plays one stream at a time through one of them).
/// A pause asked for now flushes the sink at once, from here, so the silence does not wait for
/// the playing task to come back from the engine or the sink; the playing task then works out
/// where the sound stopped and keeps the rest for the resume.
public final class PlaybackControl: Sendable {
    /// When a pause asked for takes effect.
    public enum PauseMoment: Sendable, Hashable {
        /// At once, mid-word if need be.
        case now
        /// Where the next word starts, so the current one is heard to its end.
        case wordEnd
    }

    struct State {
        var sink: (any AudioSink)?
        var request: PauseMoment?
        /// The flush started by `pause(.now)`, so the silence is immediate.
        var flush: Task<FlushPosition?, Never>?
        var isPaused = false
        /// The caller of `pause` waiting to hear whether the stream paused.
        var pauseWaiters: [CheckedContinuation<Bool, Never>] = []
        /// The playing task waiting for `resume()`.
        var resumeWaiter: CheckedContinuation<Bool, Never>?
        var resumeRequested = false
    }

    let state = Mutex(State())

    public init() {}

    /// Asks the stream playing now to pause.
    /// - Returns: true once it is paused (the sink silent); false when no stream is playing, it
    ///   is paused or pausing already, or it ended before reaching the point to pause at.
    public func pause(_ moment: PauseMoment = .now) async -> Bool {
        await withCheckedContinuation { continuation in
            let answerNow = state.withLock { state -> Bool in
                guard let sink = state.sink, state.request == nil, !state.isPaused else { return true }
                state.request = moment
                state.pauseWaiters.append(continuation)
                if moment == .now {
                    state.flush = Task { (try? await sink.flushCountingUnplayed()) ?? nil }
                }
                return false
            }
            if answerNow { continuation.resume(returning: false) }
        }
    }

    /// Continues a paused stream from where it stopped.
    /// - Returns: false when no stream is paused.
    @discardableResult
    public func resume() -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>?? in
            guard state.isPaused else { return .none }
            state.isPaused = false
            state.resumeRequested = true
            defer { state.resumeWaiter = nil }
            return .some(state.resumeWaiter)
        }
        guard case .some(let continuation) = waiter else { return false }
        continuation?.resume(returning: true)
        return true
    }

    /// True while a stream is paused.
    public var isPaused: Bool { state.withLock { $0.isPaused } }

    // MARK: Used by AudioPlayback

    func begin(on sink: any AudioSink) {
        state.withLock { $0 = State(sink: sink) }
    }

    /// The stream ended: a pause still asked for is answered false.
    func end() {
        let (waiters, resumeWaiter) = state.withLock { state in
            defer { state = State() }
            return (state.pauseWaiters, state.resumeWaiter)
        }
        for waiter in waiters { waiter.resume(returning: false) }
        resumeWaiter?.resume(returning: false)
    }

    var request: PauseMoment? { state.withLock { $0.request } }

    /// A pause waiting for a word's end has reached it: it becomes a pause now, flushing the
    /// sink at once.
    func pauseNowInsteadOfAtWordEnd() {
        state.withLock { state in
            guard state.request == .wordEnd, let sink = state.sink else { return }
            state.request = .now
            state.flush = Task { (try? await sink.flushCountingUnplayed()) ?? nil }
        }
    }

    /// Waits for the flush `pause(.now)` started, if any.
    /// - Returns: where it stopped the sound; nil when there was none or the sink cannot tell.
    func awaitRequestedFlush() async -> FlushPosition? {
        let flush = state.withLock { $0.flush }
        return await flush?.value
    }

    /// The sink is silent: answers the pause, then waits for `resume()`.
    /// - Throws: `CancellationError` when the playing task is cancelled while paused.
    func pausedUntilResumed() async throws {
        let waiters = state.withLock { state in
            state.request = nil
            state.flush = nil
            state.isPaused = true
            state.resumeRequested = false
            defer { state.pauseWaiters = [] }
            return state.pauseWaiters
        }
        for waiter in waiters { waiter.resume(returning: true) }
        let resumed = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if state.resumeRequested || Task.isCancelled { return true }
                    state.resumeWaiter = continuation
                    return false
                }
                if ready { continuation.resume(returning: true) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.resumeWaiter = nil }
                return state.resumeWaiter
            }
            waiter?.resume(returning: false)
        }
        state.withLock { state in
            state.isPaused = false
            state.resumeRequested = false
        }
        if !resumed || Task.isCancelled { throw CancellationError() }
    }
}
