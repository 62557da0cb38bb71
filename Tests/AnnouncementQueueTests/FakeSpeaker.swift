import AnnouncementQueue
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

/// A speaker the test drives: `speak` waits until the test completes or fails it, records
/// the order things started in, and sees its task being cancelled.
///
/// Continuations are always resumed outside the lock: resuming takes the resumed task's lock,
/// while cancelling a task holds that lock and runs the handlers here, which take this one.
final class FakeSpeaker: AnnouncementSpeaker {
    struct SpeakFailure: Error, CustomStringConvertible {
        var description: String
    }

    private typealias Waiter = (count: Int, continuation: CheckedContinuation<Void, Never>)

    private struct State {
        var started: [String] = []
        var cancelled: [String] = []
        var speaking: [String: CheckedContinuation<SpeechOutcome, any Error>] = [:]
        var cancelledBeforeSuspending: Set<String> = []
        var startWaiters: [Waiter] = []
        var availabilityWaiters: [CheckedContinuation<Void, Never>] = []
        var availabilityCalls = 0
        var availabilityCallWaiters: [Waiter] = []
        var overlapping = false
        var ignoresCancellation = false
        var paused = false
        var pauses = 0
        var resumes = 0

        /// Takes the waiters whose count has been reached.
        static func due(_ waiters: inout [Waiter], reached count: Int) -> [CheckedContinuation<Void, Never>] {
            let due = waiters.filter { $0.count <= count }.map(\.continuation)
            waiters.removeAll { $0.count <= count }
            return due
        }
    }

    private let state = Mutex(State())

    func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        let id = announcement.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let (cancelledAlready, due) = state.withLock { state in
                    if !state.speaking.isEmpty { state.overlapping = true }
                    state.started.append(id)
                    let cancelledAlready = state.cancelledBeforeSuspending.remove(id) != nil
                    if cancelledAlready {
                        state.cancelled.append(id)
                    } else {
                        state.speaking[id] = continuation
                    }
                    return (cancelledAlready, State.due(&state.startWaiters, reached: state.started.count))
                }
                if cancelledAlready { continuation.resume(throwing: CancellationError()) }
                for waiter in due { waiter.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<SpeechOutcome, any Error>? in
                if state.ignoresCancellation {
                    state.cancelled.append(id)
                    return nil
                }
                if let continuation = state.speaking.removeValue(forKey: id) {
                    state.paused = false
                    state.cancelled.append(id)
                    return continuation
                }
                state.cancelledBeforeSuspending.insert(id)
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    func waitUntilAvailable() async {
        await withCheckedContinuation { continuation in
            let due = state.withLock { state in
                state.availabilityCalls += 1
                state.availabilityWaiters.append(continuation)
                return State.due(&state.availabilityCallWaiters, reached: state.availabilityCalls)
            }
            for waiter in due { waiter.resume() }
        }
    }

    /// Pauses whatever `speak` is running: true when something is, and not paused already.
    func pause(atWordEnd: Bool) async -> Bool {
        state.withLock { state in
            guard !state.speaking.isEmpty, !state.paused else { return false }
            state.paused = true
            state.pauses += 1
            return true
        }
    }

    func resume() -> Bool {
        state.withLock { state in
            guard state.paused else { return false }
            state.paused = false
            state.resumes += 1
            return true
        }
    }

    /// How often `pause` and `resume` succeeded.
    var pauseCalls: (pauses: Int, resumes: Int) { state.withLock { ($0.pauses, $0.resumes) } }

    /// When set, `speak` goes on after its task is cancelled, as a wedged device would.
    var ignoresCancellation: Bool {
        get { state.withLock { $0.ignoresCancellation } }
        set { state.withLock { $0.ignoresCancellation = newValue } }
    }

    /// Ids in the order `speak` was called with them.
    var started: [String] { state.withLock { $0.started } }
    /// Ids whose `speak` saw its task cancelled.
    var cancelled: [String] { state.withLock { $0.cancelled } }
    /// The id `speak` is running for now, if any.
    var current: String? { state.withLock { $0.speaking.keys.first } }
    /// How often `waitUntilAvailable` was called.
    var availabilityCalls: Int { state.withLock { $0.availabilityCalls } }
    /// True when `speak` was ever called while another call was still running.
    var overlapped: Bool { state.withLock { $0.overlapping } }

    /// Returns once `speak` has been called `count` times in all; gives up when the task is
    /// cancelled, so a test's time limit ends it.
    func waitForStarts(_ count: Int) async {
        await wait { state, continuation in
            guard state.started.count < count else { return true }
            state.startWaiters.append((count, continuation))
            return false
        }
    }

    /// Returns once `waitUntilAvailable` has been called `count` times in all; gives up when
    /// the task is cancelled.
    func waitForAvailabilityCalls(_ count: Int) async {
        await wait { state, continuation in
            guard state.availabilityCalls < count else { return true }
            state.availabilityCallWaiters.append((count, continuation))
            return false
        }
    }

    /// Lets `speak` for `id` return normally, as if the sink played its last sample.
    func complete(_ id: String, voice: String? = "en-gb") {
        if !resume(id, with: .success(SpeechOutcome(voice: voice))) {
            Issue.record("\(id) is not speaking, so it cannot complete")
        }
    }

    /// Makes `speak` for `id` throw, as a lost sink would.
    func fail(_ id: String, message: String) {
        if !resume(id, with: .failure(SpeakFailure(description: message))) {
            Issue.record("\(id) is not speaking, so it cannot fail")
        }
    }

    /// Resumes `speak` for `id`; false when it is not speaking (it was cancelled, say).
    @discardableResult
    func resume(_ id: String, with result: Result<SpeechOutcome, any Error>) -> Bool {
        let continuation = state.withLock { state in
            defer { state.paused = false }
            return state.speaking.removeValue(forKey: id)
        }
        guard let continuation else { return false }
        continuation.resume(with: result)
        return true
    }

    /// Lets every pending `waitUntilAvailable` return.
    func becomeAvailable() {
        let waiters = state.withLock { state in
            defer { state.availabilityWaiters = [] }
            return state.availabilityWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Suspends unless `register` says the condition holds already (true); on cancellation
    /// every test waiter is released.
    private func wait(_ register: @escaping (inout State, CheckedContinuation<Void, Never>) -> Bool) async {
        await cancellableWait { continuation in
            state.withLock { register(&$0, continuation) }
        } release: {
            self.releaseTestWaiters()
        }
    }

    private func releaseTestWaiters() {
        let waiters = state.withLock { state in
            defer {
                state.startWaiters = []
                state.availabilityCallWaiters = []
            }
            return (state.startWaiters + state.availabilityCallWaiters).map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }
}
