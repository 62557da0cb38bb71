import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechRendering
import Synchronization
import Testing

/// A recorder whose writes take as long as the test says: each batch waits until `open()`, and
/// what it held counts as committed only then.
final class GatedRecorder: AnnouncementRecorder {
    private struct State {
        var isOpen = false
        /// The writes waiting for `open()`: each commits its batch and says it is done.
        var gate: [@Sendable () -> Void] = []
        /// Batches handed over, committed or not.
        var batches: [[AnnouncementEvent]] = []
        /// `type id` of every record committed.
        var committed: Set<String> = []
    }

    private let state = Mutex(State())

    static func key(_ event: AnnouncementEvent) -> String { "\(event.type.rawValue) \(event.id)" }

    func record(_ events: [AnnouncementEvent], then done: @escaping @Sendable () -> Void) {
        let write = { @Sendable in
            self.state.withLock { state in
                for event in events { state.committed.insert(Self.key(event)) }
            }
            done()
        }
        let now = state.withLock { state -> Bool in
            state.batches.append(events)
            guard !state.isOpen else { return true }
            state.gate.append(write)
            return false
        }
        if now { write() }
    }

    /// Lets every pending write and every later one commit.
    func open() {
        let waiting = state.withLock { state in
            state.isOpen = true
            defer { state.gate = [] }
            return state.gate
        }
        for write in waiting { write() }
    }

    /// Holds every later write until `open()` again.
    func close() {
        state.withLock { $0.isOpen = false }
    }

    var batches: [[AnnouncementEvent]] { state.withLock { $0.batches } }

    func isCommitted(_ event: AnnouncementEvent) -> Bool {
        state.withLock { $0.committed.contains(Self.key(event)) }
    }
}

/// The event stream's recorder stage: the audit log's writes are out of the queue, and a
/// `queued` or `finished` reaches no subscriber before its record is committed.
struct RecorderStageTests {
    /// Waits (polling, within a time limit) until `condition` holds.
    static func eventually(_ what: String, _ condition: () async -> Bool) async throws {
        for _ in 0..<2000 {
            if await condition() { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("timed out waiting until \(what)")
    }

    /// A running queue whose records go to a `GatedRecorder`, with a fake speaker.
    static func runningQueue() async throws -> (AnnouncementQueue, FakeSpeaker, GatedRecorder, Task<Void, Never>) {
        let gated = GatedRecorder()
        let speaker = FakeSpeaker()
        let shared = SharedQueueState(queues: 1, recorder: gated)
        let queue = AnnouncementQueue(speaker: speaker, clock: ManualClock(), shared: shared)
        let runner = Task { await queue.run() }
        try await Self.eventually("the queue runs") { await queue.isRunning }
        return (queue, speaker, gated, runner)
    }

    @Test(.timeLimit(.minutes(1)))
    func theQueueSchedulesWhileACommitIsPendingAndNoOneSeesAnOutcomeBeforeItsRecord() async throws {
        let (queue, speaker, gated, runner) = try await Self.runningQueue()

        // Every event the subscriber gets, and whether its record was committed when it came.
        let seen = Mutex<[(event: AnnouncementEvent, committed: Bool)]>([])
        let stream = queue.events(after: 0)
        let subscriber = Task {
            for await sequenced in stream {
                let event = sequenced.event
                seen.withLock { $0.append((event, gated.isCommitted(event))) }
            }
        }

        let first = Task { try await queue.submit(.unrendered("Platform four")) }
        try await Self.eventually("the first batch is being written") { !gated.batches.isEmpty }
        await speaker.waitForStarts(1)

        // The first row is not committed: the queue still takes and schedules the next one,
        // and answers, while its submitter waits.
        let second = Task { try await queue.submit(.unrendered("Platform five")) }
        try await Self.eventually("the second announcement waits in the queue") {
            await queue.snapshot().count == 2
        }
        let firstID = try #require(await queue.snapshot().first?.id)
        speaker.complete(firstID)
        try await Self.eventually("the first announcement has finished in the queue") {
            await queue.status(id: firstID)?.state == .finished
        }
        #expect(await queue.snapshot().count == 1, "the queue went on to the second announcement")
        try await Task.sleep(for: .milliseconds(50))
        #expect(
            seen.withLock { $0.filter { $0.event.type == .queued || $0.event.type == .finished } }.isEmpty,
            "a queued or finished event went out before its record was committed")
        #expect(gated.batches.count == 1, "records that came during the write wait for the next batch")

        gated.open()
        let accepted = try await first.value
        let secondID = try await second.value.id
        #expect(accepted.id == firstID)
        try await Self.eventually("the first outcome is out") {
            seen.withLock { $0.contains { $0.event.type == .finished && $0.event.id == firstID } }
        }
        // The records that came while the first batch was written went in one more batch.
        #expect(gated.batches.count == 2)
        #expect(gated.batches.last?.contains { $0.type == .finished && $0.id == firstID } == true)
        let held = seen.withLock { $0.filter { $0.event.type == .queued || $0.event.type == .finished } }
        // In the order they were published, each after its record.
        #expect(
            held.map { GatedRecorder.key($0.event) } == [
                "queued \(firstID)", "queued \(secondID)", "finished \(firstID)",
            ])
        #expect(held.allSatisfy { $0.committed }, "went out before its record: \(held.filter { !$0.committed })")

        await queue.shutdown()
        await runner.value
        subscriber.cancel()
    }

    @Test(.timeLimit(.minutes(1)))
    func finishedWaitReturnsOnlyAfterTheRecord() async throws {
        let (queue, speaker, gated, runner) = try await Self.runningQueue()
        gated.open()
        let accepted = try await queue.submit(.unrendered("Gate six"))
        await speaker.waitForStarts(1)

        // Closed again: the outcome's record is held up, and so is the answer to a wait.
        gated.close()
        let answered = Mutex(false)
        let waiter = Task {
            let event = await queue.finished(id: accepted.id)
            answered.withLock { $0 = true }
            return event
        }
        speaker.complete(accepted.id)
        try await Self.eventually("the announcement has finished in the queue") {
            await queue.status(id: accepted.id)?.state == .finished
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!answered.withLock { $0 }, "the wait was answered before the outcome's record was committed")
        gated.open()
        let event = await waiter.value
        #expect(event?.type == .finished)
        #expect(event.map(gated.isCommitted) == true, "the wait was answered before the record was committed")
        await queue.shutdown()
        await runner.value
    }
}
