import AnnouncementQueue
import SpeechModel
import Synchronization

/// A speaker the test drives: `speak` waits until the test completes or fails it, records
/// the order things started in, and sees its task being cancelled.
final class FakeSpeaker: AnnouncementSpeaker {
    struct SpeakFailure: Error, CustomStringConvertible {
        var description: String
    }

    private struct State {
        var started: [String] = []
        var cancelled: [String] = []
        var speaking: [String: CheckedContinuation<SpeechOutcome, any Error>] = [:]
        var cancelledBeforeSuspending: Set<String> = []
        var startWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var availabilityWaiters: [CheckedContinuation<Void, Never>] = []
        var availabilityCalls = 0
        var availabilityCallWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var overlapping = false
    }

    private let state = Mutex(State())

    func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        let id = announcement.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { state in
                    if !state.speaking.isEmpty { state.overlapping = true }
                    state.started.append(id)
                    if state.cancelledBeforeSuspending.remove(id) != nil {
                        state.cancelled.append(id)
                        continuation.resume(throwing: CancellationError())
                    } else {
                        state.speaking[id] = continuation
                    }
                    let count = state.started.count
                    state.startWaiters.removeAll { waiter in
                        guard waiter.count <= count else { return false }
                        waiter.continuation.resume()
                        return true
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                if let continuation = state.speaking.removeValue(forKey: id) {
                    state.cancelled.append(id)
                    continuation.resume(throwing: CancellationError())
                } else {
                    state.cancelledBeforeSuspending.insert(id)
                }
            }
        }
    }

    func waitUntilAvailable() async {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                state.availabilityCalls += 1
                state.availabilityWaiters.append(continuation)
                let calls = state.availabilityCalls
                state.availabilityCallWaiters.removeAll { waiter in
                    guard waiter.count <= calls else { return false }
                    waiter.continuation.resume()
                    return true
                }
            }
        }
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

    /// Returns once `speak` has been called `count` times in all.
    func waitForStarts(_ count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.started.count >= count {
                    continuation.resume()
                } else {
                    state.startWaiters.append((count, continuation))
                }
            }
        }
    }

    /// Returns once `waitUntilAvailable` has been called `count` times in all.
    func waitForAvailabilityCalls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                if state.availabilityCalls >= count {
                    continuation.resume()
                } else {
                    state.availabilityCallWaiters.append((count, continuation))
                }
            }
        }
    }

    /// Lets `speak` for `id` return normally, as if the sink played its last sample.
    func complete(_ id: String, voice: String? = "en-gb") {
        let resumed = resume(id, with: .success(SpeechOutcome(voice: voice)))
        precondition(resumed, "\(id) is not speaking")
    }

    /// Makes `speak` for `id` throw, as a lost sink would.
    func fail(_ id: String, message: String) {
        let resumed = resume(id, with: .failure(SpeakFailure(description: message)))
        precondition(resumed, "\(id) is not speaking")
    }

    /// Lets every pending `waitUntilAvailable` return.
    func becomeAvailable() {
        let waiters = state.withLock { state in
            defer { state.availabilityWaiters = [] }
            return state.availabilityWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Resumes `speak` for `id`; false when it is not speaking (it was cancelled, say).
    @discardableResult
    func resume(_ id: String, with result: Result<SpeechOutcome, any Error>) -> Bool {
        guard let continuation = state.withLock({ $0.speaking.removeValue(forKey: id) }) else { return false }
        continuation.resume(with: result)
        return true
    }
}
