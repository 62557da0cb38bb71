import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

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
        /// Set by the first `noteShutdown()`: whether the stream had ended before it.
        var endedBeforeShutdown: Bool?
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

    /// Notes that the queue is shutting down now; only the first call counts.
    func noteShutdown() {
        state.withLock { state in
            if state.endedBeforeShutdown == nil { state.endedBeforeShutdown = state.ended }
        }
    }

    /// The stream ended before `noteShutdown()`: the queue ended it (the recorder fell behind).
    var endedBeforeShutdown: Bool { state.withLock { $0.endedBeforeShutdown ?? false } }

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
        capacity: Int = 16, shareCapacity: Int? = nil, eventHistory: Int = 1024, subscriberBuffer: Int = 256,
        running: Bool = true, pauseTimeout: Duration? = AnnouncementQueue.defaultPauseTimeout
    ) async {
        queue = AnnouncementQueue(
            speaker: speaker, capacity: capacity, shareCapacity: shareCapacity, clock: clock,
            eventHistory: eventHistory,
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
        expiresAfter: Double? = nil, origin: AnnouncementOrigin? = nil
    ) async throws -> AnnouncementAccepted {
        var prepared = PreparedAnnouncement.unrendered(
            text, priority: priority, queue: interrupting, expiresAfter: expiresAfter)
        prepared.origin = origin
        return try await queue.submit(prepared)
    }

    /// Shuts the queue down and waits for `run()` to return and the event stream to end. A test
    /// that checks what shutdown did calls it itself; `withQueue` calls it again, which does nothing.
    func shutDown() async {
        recorder.noteShutdown()
        await queue.shutdown()
        await runner.value
        await recorder.waitForEnd()
    }

    /// Checks that every announcement the queue accepted (each has a `queued` event) got exactly
    /// one `finished` event. Nothing is checked when the recorder's own stream was ended before
    /// shutdown (a test of a subscriber that falls behind): it saw only part of the events.
    func expectExactlyOneFinished(sourceLocation: SourceLocation = #_sourceLocation) {
        guard !recorder.endedBeforeShutdown else { return }
        expectExactlyOneFinishedEach(recorder.events, sourceLocation: sourceLocation)
    }
}

/// Every announcement in `events` that was queued has exactly one `finished` event there.
func expectExactlyOneFinishedEach(_ events: [AnnouncementEvent], sourceLocation: SourceLocation = #_sourceLocation) {
    let queued = Set(events.filter { $0.type == .queued }.map(\.id))
    for id in queued.sorted() {
        #expect(
            events.filter { $0.type == .finished && $0.id == id }.count == 1, "\(id): not exactly one finished event",
            sourceLocation: sourceLocation)
    }
}

/// Runs `body` with a running queue (a fake speaker, a manual clock, an event recorder), then
/// shuts the queue down, also when `body` throws or an expectation failed, and checks that every
/// announcement the queue accepted got exactly one `finished` event.
/// - Parameters: those of `QueueHarness.init`, and the test's `body`.
func withQueue<Result>(
    capacity: Int = 16, shareCapacity: Int? = nil, eventHistory: Int = 1024, subscriberBuffer: Int = 256,
    running: Bool = true, pauseTimeout: Duration? = AnnouncementQueue.defaultPauseTimeout,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (QueueHarness) async throws -> Result
) async rethrows -> Result {
    let harness = await QueueHarness(
        capacity: capacity, shareCapacity: shareCapacity, eventHistory: eventHistory,
        subscriberBuffer: subscriberBuffer, running: running, pauseTimeout: pauseTimeout)
    let result: Result
    do {
        result = try await body(harness)
    } catch {
        await harness.shutDown()
        throw error
    }
    await harness.shutDown()
    harness.expectExactlyOneFinished(sourceLocation: sourceLocation)
    return result
}

extension PreparedAnnouncement {
    /// Plain text for a fake speaker, which renders nothing, with what the queue does with it.
    static func unrendered(
        _ text: String, priority: AnnouncementPriority = .default, queue: Bool = true, expiresAfter: Double? = nil,
        output: String? = nil
    ) -> PreparedAnnouncement {
        var prepared = PreparedAnnouncement(
            speech: .unrendered(text),
            delivery: AnnouncementDelivery(priority: priority, queue: queue, expiresAfter: expiresAfter))
        prepared.output = output
        return prepared
    }
}

extension PreparedUtterance {
    /// Plain text as the queue carries it to a fake speaker, which renders nothing.
    static func unrendered(_ text: String) -> PreparedUtterance {
        PreparedUtterance(utterance: Utterance(text), voices: [], engineInput: 0)
    }
}
