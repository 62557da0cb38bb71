import AnnouncementQueue
import Foundation
import SpeechModel
import SpeechRendering
import Synchronization

/// A speaker whose announcements finish when the test says so (or at once with `autoComplete`).
/// Only the timing is scripted; the real queue does the scheduling.
public final class GatedSpeaker: AnnouncementSpeaker {
    private struct State {
        var spoken: [String] = []
        var speeches: [PreparedUtterance] = []
        var gates: [String: CheckedContinuation<Void, Never>] = [:]
        var released: Set<String> = []
    }

    public let autoComplete: Bool
    private let state = Mutex(State())

    public init(autoComplete: Bool = false) {
        self.autoComplete = autoComplete
    }

    /// Ids in the order they started speaking.
    public var spoken: [String] { state.withLock { $0.spoken } }

    /// What the speaker was handed to render, in the same order.
    public var speeches: [PreparedUtterance] { state.withLock { $0.speeches } }

    public func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        state.withLock {
            $0.spoken.append(announcement.id)
            $0.speeches.append(announcement.speech)
        }
        if autoComplete { return SpeechOutcome(voice: "tone") }
        let id = announcement.id
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if state.released.contains(id) || Task.isCancelled { return true }
                    state.gates[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let gate = state.withLock { state in
                state.released.insert(id)
                return state.gates.removeValue(forKey: id)
            }
            gate?.resume()
        }
        try Task.checkCancellation()
        return SpeechOutcome(voice: "tone")
    }

    /// Lets the speaking announcement `id` finish as played to the end.
    public func complete(_ id: String) {
        let gate = state.withLock { state in
            state.released.insert(id)
            return state.gates.removeValue(forKey: id)
        }
        gate?.resume()
    }

    public func waitUntilAvailable() async {}
}

/// A running `AnnouncementQueue` driven by a `GatedSpeaker`.
public final class RunningQueue: Sendable {
    public let speaker: GatedSpeaker
    public let queue: AnnouncementQueue
    private let runner: Task<Void, Never>

    public init(capacity: Int = 4, autoComplete: Bool = false) {
        speaker = GatedSpeaker(autoComplete: autoComplete)
        let queue = AnnouncementQueue(speaker: speaker, capacity: capacity)
        self.queue = queue
        runner = Task { await queue.run() }
    }

    /// Waits until `run()` is active, so a first announcement starts speaking at once.
    public func waitUntilRunning() async throws {
        while await !queue.isRunning {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Waits until the queue has handed `count` announcements to the speaker.
    public func waitUntilSpoken(_ count: Int) async throws {
        while speaker.spoken.count < count {
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    public func shutdown() async {
        await queue.shutdown()
        await runner.value
    }

    deinit { runner.cancel() }
}
