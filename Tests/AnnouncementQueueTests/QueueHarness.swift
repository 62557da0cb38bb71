import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization

/// Every event the queue sent, collected as it arrives, with ways to wait for one.
final class EventRecorder: Sendable {
    private struct State {
        var events: [SequencedAnnouncementEvent] = []
        var waiters:
            [(
                predicate: @Sendable ([SequencedAnnouncementEvent]) -> Bool,
                continuation: CheckedContinuation<Void, Never>
            )] =
                []
        var ended = false
    }

    private let state = Mutex(State())

    init(_ stream: AsyncStream<SequencedAnnouncementEvent>) {
        Task {
            for await event in stream {
                self.record(event)
            }
            self.end()
        }
    }

    var events: [AnnouncementEvent] { state.withLock { $0.events.map(\.event) } }
    var sequenced: [SequencedAnnouncementEvent] { state.withLock { $0.events } }
    var ended: Bool { state.withLock { $0.ended } }

    /// The finished events, in order.
    var finished: [AnnouncementEvent] { events.filter { $0.type == .finished } }

    func finished(_ id: String) -> AnnouncementEvent? {
        events.first { $0.type == .finished && $0.id == id }
    }

    /// Returns once `predicate` holds for the events so far (or the stream ended).
    /// Gives up when the task is cancelled, so a test's time limit ends a wait that never comes true.
    /// Continuations are resumed outside the lock, as in `FakeSpeaker`.
    func wait(until predicate: @escaping @Sendable ([SequencedAnnouncementEvent]) -> Bool) async {
        await cancellableWait { continuation in
            state.withLock { state in
                guard !state.ended, !predicate(state.events) else { return true }
                state.waiters.append((predicate, continuation))
                return false
            }
        } release: {
            self.releaseWaiters()
        }
    }

    /// Returns once `id` has a `finished` event, and that event.
    @discardableResult
    func waitForFinished(_ id: String) async -> AnnouncementEvent? {
        await wait { events in events.contains { $0.event.type == .finished && $0.event.id == id } }
        return finished(id)
    }

    /// Returns once `count` events have arrived.
    func waitForCount(_ count: Int) async {
        await wait { $0.count >= count }
    }

    /// Returns once the stream has ended.
    func waitForEnd() async {
        await wait { _ in false }
    }

    private func record(_ event: SequencedAnnouncementEvent) {
        let due = state.withLock { state in
            state.events.append(event)
            let events = state.events
            let due = state.waiters.filter { $0.predicate(events) }.map(\.continuation)
            state.waiters.removeAll { $0.predicate(events) }
            return due
        }
        for continuation in due { continuation.resume() }
    }

    private func end() {
        state.withLock { $0.ended = true }
        releaseWaiters()
    }

    private func releaseWaiters() {
        let waiters = state.withLock { state in
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A running queue with a fake speaker, a manual clock and an event recorder.
struct QueueHarness {
    let speaker = FakeSpeaker()
    let clock = ManualClock()
    let queue: AnnouncementQueue
    let recorder: EventRecorder
    let runner: Task<Void, Never>

    init(
        capacity: Int = 16, eventHistory: Int = 1024, subscriberBuffer: Int = 256, running: Bool = true,
        pauseTimeout: Duration? = AnnouncementQueue.defaultPauseTimeout
    ) async {
        queue = AnnouncementQueue(
            speaker: speaker, capacity: capacity, clock: clock, eventHistory: eventHistory,
            subscriberBuffer: subscriberBuffer, pauseTimeout: pauseTimeout)
        recorder = EventRecorder(queue.events(after: 0))
        let queue = self.queue
        runner = running ? Task { await queue.run() } : Task {}
        if running {
            while !(await queue.isRunning) {
                await Task.yield()
            }
        }
    }

    /// Submits plain text.
    @discardableResult
    func submit(
        _ text: String, priority: AnnouncementPriority = .default, queue interrupting: Bool = true,
        expiresAfter: Double? = nil
    ) async throws -> AnnouncementAccepted {
        try await queue.submit(
            .unrendered(
                AnnouncementRequest(
                    utterance: Utterance(text), priority: priority, queue: interrupting, expiresAfter: expiresAfter)))
    }

    /// Shuts the queue down and waits for `run()` to return.
    func tearDown() async {
        await queue.shutdown()
        await runner.value
        await recorder.waitForEnd()
    }
}

extension PreparedAnnouncement {
    /// `request`, validated, with its utterance unrendered for a fake speaker.
    static func unrendered(_ request: AnnouncementRequest) throws -> PreparedAnnouncement {
        try PreparedAnnouncement(
            request, speech: PreparedUtterance(utterance: request.utterance, voices: [], engineInput: 0))
    }
}

extension PreparedUtterance {
    /// Plain text as the queue carries it to a fake speaker, which renders nothing.
    static func unrendered(_ text: String) -> PreparedUtterance {
        PreparedUtterance(utterance: Utterance(text), voices: [], engineInput: 0)
    }
}
