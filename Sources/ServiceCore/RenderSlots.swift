import SpeakAPI
import SpeakService
import Synchronization

/// The renders that may hold audio at once (`POST /v1/speech`, a Wyoming `synthesize`), so the
/// memory they take is bounded: each holds its audio (a WAV whole up to 30 s, then streamed)
/// from the first chunk until the front has handed its last byte to the connection.
///
/// A request beyond `count` waits, first come first served, holding only its body; beyond
/// `maxWaiting` waiting ones it is refused (429). Waiting costs no throughput: the engine
/// workers render one utterance each, so renders beyond their number wait for one anyway.
final class RenderSlots: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var free: Int
        var waiting: [Waiter] = []
        var nextID: UInt64 = 0
    }

    /// How many renders hold audio at once.
    let count: Int
    /// How many may wait for a slot before more are refused.
    let maxWaiting: Int
    private let state: Mutex<State>

    /// - Parameters:
    ///   - count: how many renders hold audio at once (at least 1).
    ///   - maxWaiting: how many may wait for a slot before more are refused.
    init(count: Int, maxWaiting: Int) {
        self.count = max(1, count)
        self.maxWaiting = max(0, maxWaiting)
        state = Mutex(State(free: max(1, count)))
    }

    /// How many requests wait for a slot now.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Waits for a slot; the lease gives it back when released or dropped.
    /// - Throws: `SpeakError` `queueFull` (`tooManyRenders`, HTTP 429) when `maxWaiting` requests
    ///   wait already; `CancellationError` when the task is cancelled while it waits.
    func acquire() async throws -> RenderHold {
        enum Outcome {
            case granted
            case refused
            case wait(UInt64)
        }
        let outcome = state.withLock { state -> Outcome in
            if state.free > 0 {
                state.free -= 1
                return .granted
            }
            guard state.waiting.count < maxWaiting else { return .refused }
            defer { state.nextID += 1 }
            return .wait(state.nextID)
        }
        switch outcome {
        case .granted:
            return hold()
        case .refused:
            throw SpeakError(
                .queueFull, name: ErrorResponse.Code.tooManyRenders,
                "\(count) renders are running and \(maxWaiting) are waiting, the most this speakd takes at once; "
                    + "retry after a second")
        case .wait(let id):
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let cancelled = state.withLock { state -> Bool in
                        if Task.isCancelled { return true }
                        state.waiting.append(Waiter(id: id, continuation: continuation))
                        return false
                    }
                    if cancelled { continuation.resume(throwing: CancellationError()) }
                }
            } onCancel: {
                let waiter = state.withLock { state -> Waiter? in
                    guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiting.remove(at: index)
                }
                waiter?.continuation.resume(throwing: CancellationError())
            }
            // Handed over by `release()`: the slot is this one's now.
            return hold()
        }
    }

    /// A slot's hold, which gives it back once.
    private func hold() -> RenderHold {
        RenderHold { [self] in release() }
    }

    /// Hands the slot to the longest waiting request, or frees it.
    private func release() {
        let next = state.withLock { state -> Waiter? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume()
    }
}
