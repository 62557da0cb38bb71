import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import Testing

/// Two outputs, each a queue with its own fake speaker, sharing events and ids.
@Suite("Announcement outputs", .timeLimit(.minutes(1)))
struct AnnouncementOutputsTests {
    struct Harness {
        let hallSpeaker = FakeSpeaker()
        let headsetSpeaker = FakeSpeaker()
        let outputs: AnnouncementOutputs
        let recorder: EventRecorder
        let runners: [Task<Void, Never>]

        init() async {
            let shared = SharedQueueState(queues: 2)
            let hall = AnnouncementQueue(speaker: hallSpeaker, shared: shared)
            let headset = AnnouncementQueue(speaker: headsetSpeaker, output: "headset", shared: shared)
            outputs = AnnouncementOutputs([hall, headset], shared: shared)
            recorder = EventRecorder(outputs.events(after: 0))
            runners = [hall, headset].map { queue in Task { await queue.run() } }
            for queue in [hall, headset] {
                while !(await queue.isRunning) { await Task.yield() }
            }
        }

        func submit(_ text: String, to output: String? = nil, priority: AnnouncementPriority = .default)
            async throws -> AnnouncementAccepted
        {
            let prepared = PreparedAnnouncement.unrendered(text, priority: priority, output: output)
            return try await outputs.queue(for: prepared).submit(prepared)
        }

        /// Shuts both queues down and waits for the stream to end; a second call does nothing.
        func shutDown() async {
            recorder.noteShutdown()
            await outputs.shutdown()
            for runner in runners { await runner.value }
            await recorder.waitForEnd()
        }
    }

    /// Runs `body` with both outputs running, then shuts them down, also when `body` throws, and
    /// checks that every accepted announcement got exactly one `finished` event.
    func withOutputs(
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (Harness) async throws -> Void
    ) async rethrows {
        let harness = await Harness()
        do {
            try await body(harness)
        } catch {
            await harness.shutDown()
            throw error
        }
        await harness.shutDown()
        if !harness.recorder.endedBeforeShutdown {
            expectExactlyOneFinishedEach(harness.recorder.events, sourceLocation: sourceLocation)
        }
    }

    @Test func eachOutputSpeaksItsOwnAtOnce() async throws {
        try await withOutputs { harness in
            let hall = try await harness.submit("Platform nine")
            let headset = try await harness.submit("Your ticket", to: "headset", priority: .low)
            // A low on the headset does not wait behind the hall's default: each queue has its own speaker.
            #expect(hall.state == .speaking)
            #expect(headset.state == .speaking)
            await harness.hallSpeaker.waitForStarts(1)
            await harness.headsetSpeaker.waitForStarts(1)
            #expect(hall.id != headset.id)

            let list = await harness.outputs.snapshot()
            #expect(list.map(\.output) == ["default", "headset"])
            #expect(await harness.outputs.status(id: headset.id)?.output == "headset")

            // Cancelling by id finds the queue; cancelling one output leaves the other speaking.
            #expect(try await harness.outputs.cancel(id: headset.id))
            #expect(await harness.outputs.finished(id: headset.id)?.reason == .cancelled)
            #expect(try await harness.outputs.cancelAll(output: "headset") == 0)
            #expect(await harness.outputs.status(id: hall.id)?.state == .speaking)
            harness.hallSpeaker.complete(hall.id)
            #expect(await harness.outputs.finished(id: hall.id)?.success == true)
            await harness.shutDown()

            // One stream, in one sequence, each event naming its output.
            let sequenced = harness.recorder.sequenced
            #expect(sequenced.map(\.sequence) == Array(1...UInt64(sequenced.count)))
            #expect(harness.recorder.events.filter { $0.id == hall.id }.allSatisfy { $0.output == "default" })
            #expect(harness.recorder.events.filter { $0.id == headset.id }.allSatisfy { $0.output == "headset" })
            #expect(harness.recorder.finished.count == 2)
        }
    }

    @Test func anUnknownOutputNamesTheField() async throws {
        await withOutputs { harness in
            await #expect {
                _ = try await harness.submit("Hello", to: "lobby")
            } throws: { error in
                (error as? AnnouncementQueueError)?.field == "output"
                    && (error as? AnnouncementQueueError)?.isInvalidValue == true
            }
            await #expect(throws: AnnouncementQueueError.invalidValue(field: "output", message: "")) {
                _ = try await harness.outputs.cancelAll(output: "lobby")
            }
            await #expect(throws: AnnouncementQueueError.unknownAnnouncement("0")) {
                _ = try await harness.outputs.cancel(id: "000000000000")
            }
            await harness.shutDown()
            #expect(harness.recorder.events.isEmpty)
        }
    }

    /// A server built over one queue (as before outputs had names) sees it as `default`.
    @Test(arguments: ["default", "hall"])
    func aSingleQueueIsTheDefaultOutput(name: String) async throws {
        let queue = AnnouncementQueue(speaker: FakeSpeaker(), output: name)
        let outputs = AnnouncementOutputs(single: queue)
        #expect(outputs.defaultQueue === queue)
        #expect(try outputs.queue(for: PreparedAnnouncement.unrendered("Hi")) === queue)
        #expect(outputs.queue(named: name) === queue)
    }

    @Test func theStreamEndsWhenTheLastQueueHasShutDown() async throws {
        try await withOutputs { harness in
            await harness.outputs.queues[1].shutdown()
            #expect(!harness.recorder.ended)
            let hall = try await harness.submit("Still here")
            #expect(hall.state == .speaking)
            await harness.shutDown()
            #expect(harness.recorder.ended)
            #expect(harness.recorder.finished(hall.id)?.reason == .shutdown)
        }
    }
}
