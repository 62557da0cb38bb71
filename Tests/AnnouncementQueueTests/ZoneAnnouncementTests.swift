import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

/// A fake speaker that also notes the instant each `speak` began: where the zones' start
/// barrier is seen.
final class StampingSpeaker: AnnouncementSpeaker {
    let fake = FakeSpeaker()
    private let starts = Mutex<[String: ContinuousClock.Instant]>([:])

    func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        starts.withLock { $0[announcement.id] = .now }
        return try await fake.speak(announcement)
    }

    func waitUntilAvailable() async { await fake.waitUntilAvailable() }

    func pause(atWordEnd: Bool) async -> Bool { await fake.pause(atWordEnd: atWordEnd) }

    func resume() -> Bool { fake.resume() }

    func start(of id: String) -> ContinuousClock.Instant? { starts.withLock { $0[id] } }
}

/// One announcement in several zones: one id, a start barrier across the zones' queues, one
/// `finished` with each zone's reason.
@Suite("Zone announcements", .timeLimit(.minutes(1)))
struct ZoneAnnouncementTests {
    struct Harness {
        let hall = StampingSpeaker()
        let platform = StampingSpeaker()
        let outputs: AnnouncementOutputs
        let recorder: EventRecorder
        let runners: [Task<Void, Never>]

        /// `default` (the hall, no receiver delay) and `platform` (an RTP zone heard 40 ms after sending).
        init(capacity: Int = 16, startTimeout: Duration = .seconds(30)) async {
            let shared = SharedQueueState(queues: 2)
            let hallQueue = AnnouncementQueue(speaker: hall, capacity: capacity, shared: shared)
            let platformQueue = AnnouncementQueue(
                speaker: platform, capacity: capacity, output: "platform", receiverDelay: .milliseconds(40),
                shared: shared)
            outputs = AnnouncementOutputs(
                [hallQueue, platformQueue], shared: shared, zoneGroups: ["concourse": ["default", "platform"]],
                zoneStartTimeout: startTimeout)
            recorder = EventRecorder(outputs.events(after: 0))
            runners = [hallQueue, platformQueue].map { queue in Task { await queue.run() } }
            for queue in [hallQueue, platformQueue] {
                while !(await queue.isRunning) { await Task.yield() }
            }
        }

        func submitZoned(
            _ text: String = "The train to Faro leaves from platform two", priority: AnnouncementPriority = .default,
            queue: Bool = true
        ) async throws -> AnnouncementAccepted {
            let prepared = PreparedAnnouncement.unrendered(text, priority: priority, queue: queue)
            return try await outputs.submit(prepared, zones: try outputs.zones(named: ["concourse"], list: false))
        }

        func submit(_ text: String, to output: String, priority: AnnouncementPriority = .default)
            async throws -> AnnouncementAccepted
        {
            let prepared = PreparedAnnouncement.unrendered(text, priority: priority, output: output)
            return try await outputs.queue(for: prepared).submit(prepared)
        }

        func shutDown() async {
            recorder.noteShutdown()
            await outputs.shutdown()
            for runner in runners { await runner.value }
            await recorder.waitForEnd()
        }
    }

    func withZones(
        capacity: Int = 16, startTimeout: Duration = .seconds(30),
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (Harness) async throws -> Void
    ) async rethrows {
        let harness = await Harness(capacity: capacity, startTimeout: startTimeout)
        do {
            try await body(harness)
        } catch {
            await harness.shutDown()
            throw error
        }
        await harness.shutDown()
        expectExactlyOneFinishedEach(harness.recorder.events, sourceLocation: sourceLocation)
    }

    @Test func namesResolveToZonesOnceEachInOrder() async throws {
        try await withZones { harness in
            #expect(
                try harness.outputs.zones(named: ["platform", "concourse"], list: true) == ["platform", "default"])
            do {
                _ = try harness.outputs.zones(named: ["platform", "attic"], list: true)
                Issue.record("an unknown zone was accepted")
            } catch let error as AnnouncementQueueError {
                #expect(error.isInvalidValue && error.field == "output[1]")
            }
        }
    }

    @Test func pauseResumeAndStatusTakeEveryZone() async throws {
        try await withZones { harness in
            let accepted = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(1)
            #expect(await harness.outputs.status(id: accepted.id)?.state == .speaking)

            let paused = try await harness.outputs.pause(id: accepted.id, atWordEnd: false)
            #expect(paused.state == .paused && paused.output == "default", "\(paused)")
            #expect(harness.hall.fake.pauseCalls == (1, 0) && harness.platform.fake.pauseCalls == (1, 0))
            let resumed = try await harness.outputs.resume(id: accepted.id)
            #expect(resumed.state == .speaking)
            #expect(harness.hall.fake.pauseCalls == (1, 1) && harness.platform.fake.pauseCalls == (1, 1))

            // One zone done is not the announcement done: it is still speaking in the other.
            harness.hall.fake.complete(accepted.id)
            await harness.recorder.wait { events in
                events.contains { $0.event.type == .started && $0.event.output == "platform" }
            }
            try await Task.sleep(for: .milliseconds(20))
            let half = await harness.outputs.status(id: accepted.id)
            #expect(half?.state == .speaking && half?.success == nil, "\(String(describing: half))")
            // Paused where it still speaks; the zone that finished refuses, and that is no error.
            #expect(try await harness.outputs.pause(id: accepted.id, atWordEnd: false).state == .paused)
            #expect(harness.platform.fake.pauseCalls == (2, 1))
            _ = try await harness.outputs.resume(id: accepted.id)
            harness.platform.fake.complete(accepted.id)
            _ = await harness.outputs.finished(id: accepted.id)
            let done = await harness.outputs.status(id: accepted.id)
            #expect(done?.state == .finished && done?.success == true && done?.reason == .completed)
            await #expect(throws: AnnouncementQueueError.self) {
                try await harness.outputs.pause(id: accepted.id, atWordEnd: false)
            }
        }
    }

    @Test func zoneGroupsAreCheckedAgainstTheOutputs() {
        let outputs = ["default", "platform1", "platform2"]
        #expect(AnnouncementOutputs.checkZoneGroups(["hall": ["platform1", "platform2"]], outputs: outputs) == nil)
        #expect(
            AnnouncementOutputs.checkZoneGroups(["hall": ["platform1", "attic"]], outputs: outputs)?.contains("'attic'")
                == true)
        #expect(
            AnnouncementOutputs.checkZoneGroups(["platform1": ["platform2"]], outputs: outputs)?.contains(
                "'platform1'") == true)
    }

    @Test func bothZonesStartTogetherLessTheirReceiverDelayAndFinishOnce() async throws {
        // The lead is measured where the speakers woke; under the parallel unit tier a wake can be
        // late, so a miss is measured again once, with a fresh pair of queues, before it counts.
        let expected = Duration.milliseconds(25)...Duration.milliseconds(55)
        var lead = try await measuredLead()
        if let first = lead, !expected.contains(first) { lead = try await measuredLead() }
        #expect(lead.map(expected.contains) == true, "the platform led the hall by \(String(describing: lead))")
    }

    /// One zoned announcement through the two zones, checked whole; returns how long the
    /// platform's start led the hall's.
    private func measuredLead() async throws -> Duration? {
        var measured: Duration?
        try await withZones { harness in
            let accepted = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(1)
            let hallStart = try #require(harness.hall.start(of: accepted.id))
            let platformStart = try #require(harness.platform.start(of: accepted.id))
            // The platform's receiver hears it 40 ms after it is sent: it is sent 40 ms sooner.
            measured = platformStart.duration(to: hallStart)

            harness.hall.fake.complete(accepted.id)
            #expect(harness.recorder.finished(accepted.id) == nil, "finished before the platform ended")
            harness.platform.fake.complete(accepted.id)
            let finished = try #require(await harness.outputs.finished(id: accepted.id))
            #expect(finished.success == true)
            #expect(finished.reason == .completed)
            #expect(finished.outputs?.map(\.output) == ["default", "platform"])
            #expect(finished.outputs?.map(\.reason) == [.completed, .completed])
            await harness.recorder.wait { events in events.contains { $0.event.type == .finished } }
            let events = harness.recorder.events.filter { $0.id == accepted.id }
            #expect(events.filter { $0.type == .queued }.count == 1)
            #expect(events.filter { $0.type == .finished }.count == 1)
            #expect(Set(events.filter { $0.type == .started }.compactMap(\.output)) == ["default", "platform"])
        }
        return measured
    }

    @Test func aBusyZoneHoldsTheOthersUntilItsQueueReachesIt() async throws {
        try await withZones { harness in
            let busy = try await harness.submit("Mind the gap", to: "platform")
            await harness.platform.fake.waitForStarts(1)
            let zoned = try await harness.submitZoned()
            // The hall's queue has it at its head but waits, silent, at the barrier.
            try await Task.sleep(for: .milliseconds(100))
            #expect(harness.hall.fake.started.isEmpty)
            #expect(await harness.outputs.status(id: zoned.id)?.state == .speaking)

            harness.platform.fake.complete(busy.id)
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(2)
            harness.hall.fake.complete(zoned.id)
            harness.platform.fake.complete(zoned.id)
            #expect(await harness.outputs.finished(id: zoned.id)?.success == true)
        }
    }

    @Test func aHighInterruptsABusyZoneAndStartsInBoth() async throws {
        try await withZones { harness in
            let busy = try await harness.submit("Mind the gap", to: "platform")
            await harness.platform.fake.waitForStarts(1)
            let zoned = try await harness.submitZoned(priority: .high)
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(2)
            #expect(await harness.outputs.finished(id: busy.id)?.reason == .interrupted)
            harness.hall.fake.complete(zoned.id)
            harness.platform.fake.complete(zoned.id)
            #expect(await harness.outputs.finished(id: zoned.id)?.success == true)
        }
    }

    @Test func cancelStopsEveryZoneAndFinishesOnce() async throws {
        try await withZones { harness in
            let zoned = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(1)
            #expect(try await harness.outputs.cancel(id: zoned.id))
            let finished = try #require(await harness.outputs.finished(id: zoned.id))
            #expect(finished.success == false)
            #expect(finished.reason == .cancelled)
            #expect(finished.outputs?.map(\.reason) == [.cancelled, .cancelled])
            #expect(harness.hall.fake.cancelled == [zoned.id])
            #expect(harness.platform.fake.cancelled == [zoned.id])
        }
    }

    @Test func aZoneThatCannotStartInTimeFailsThereAndTheOthersStart() async throws {
        try await withZones(startTimeout: .milliseconds(200)) { harness in
            // A high on the platform is never interrupted: the announcement waits behind it.
            let busy = try await harness.submit("Evacuate platform two", to: "platform", priority: .high)
            await harness.platform.fake.waitForStarts(1)
            let clock = ContinuousClock()
            let submitted = clock.now
            let zoned = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            let waited = submitted.duration(to: try #require(harness.hall.start(of: zoned.id)))
            #expect(waited >= .milliseconds(200) && waited < .seconds(2), "the hall waited \(waited)")
            harness.hall.fake.complete(zoned.id)
            let finished = try #require(await harness.outputs.finished(id: zoned.id))
            #expect(finished.success == false)
            #expect(finished.reason == .failed)
            #expect(finished.outputs?.map(\.reason) == [.completed, .failed])
            #expect(finished.outputs?.last?.detail?.contains("could not start") == true)
            // The busy zone's own announcement was not disturbed.
            #expect(harness.platform.fake.current == busy.id)
            harness.platform.fake.complete(busy.id)
        }
    }

    @Test func aZoneWhoseQueueIsFullFailsThereAtOnce() async throws {
        try await withZones(capacity: 0) { harness in
            let busy = try await harness.submit("Mind the gap", to: "platform")
            await harness.platform.fake.waitForStarts(1)
            let zoned = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            harness.hall.fake.complete(zoned.id)
            let finished = try #require(await harness.outputs.finished(id: zoned.id))
            #expect(finished.outputs?.map(\.reason) == [.completed, .failed])
            #expect(finished.success == false)
            harness.platform.fake.complete(busy.id)
        }
    }

    @Test func aZoneInterruptedAfterTheStartEndsOnlyThere() async throws {
        try await withZones { harness in
            let zoned = try await harness.submitZoned()
            await harness.hall.fake.waitForStarts(1)
            await harness.platform.fake.waitForStarts(1)
            let urgent = try await harness.submit("Evacuate", to: "platform", priority: .high)
            await harness.platform.fake.waitForStarts(2)
            harness.hall.fake.complete(zoned.id)
            let finished = try #require(await harness.outputs.finished(id: zoned.id))
            #expect(finished.outputs?.map(\.reason) == [.completed, .interrupted])
            #expect(finished.reason == .interrupted)
            harness.platform.fake.complete(urgent.id)
        }
    }
}
