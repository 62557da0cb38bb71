import AnnouncementQueue
import SpeechModel
import Testing

@Suite("Announcement queue", .timeLimit(.minutes(1)))
struct AnnouncementQueueTests {
    @Test func speaksOneAndFinishesCompleted() async throws {
        let harness = await QueueHarness()
        let submission = try await harness.submit("Hello")
        #expect(submission.state == .speaking)
        #expect(submission.position == 0)
        await harness.speaker.waitForStarts(1)
        harness.speaker.complete(submission.id, voice: "gmw/en")
        let finished = await harness.queue.finished(id: submission.id)
        #expect(finished?.success == true)
        #expect(finished?.reason == .completed)
        #expect(finished?.voice == "gmw/en")
        #expect(finished?.text == "Hello")
        await harness.tearDown()
        let types = harness.recorder.events.map(\.type)
        #expect(types == [.queued, .started, .finished])
    }
}
