import AnnouncementQueue
import SpeakAPI
import SpeechModel
import Testing

@Suite("Event stream", .timeLimit(.minutes(1)))
struct EventStreamTests {
    @Test func sequencesCountUpFromOne() async throws {
        try await withQueue { harness in
            #expect(harness.queue.lastEventSequence == 0)
            let first = try await harness.submit("first")
            try await harness.submit("second")
            harness.speaker.complete(first.id)
            await harness.recorder.waitForCount(5)
            #expect(harness.recorder.sequenced.map(\.sequence) == [1, 2, 3, 4, 5])
            #expect(harness.queue.lastEventSequence == 5)
        }
    }

    @Test(arguments: [0, 1, 4, 6] as [UInt64])
    func resumingReplaysEverythingAfterTheLastSeenSequence(lastSeen: UInt64) async throws {
        try await withQueue { harness in
            let first = try await harness.submit("first")
            try await harness.submit("second")
            try await harness.submit("third", priority: .low)
            harness.speaker.complete(first.id)
            // queued ×3, started, finished, started
            await harness.recorder.waitForCount(6)
            let all = harness.recorder.sequenced

            let resumed = EventRecorder(harness.queue.events(after: lastSeen))
            await resumed.waitForCount(6 - Int(lastSeen))
            #expect(resumed.sequenced == Array(all.dropFirst(Int(lastSeen))))

            // Then it goes on live.
            let fourth = try await harness.submit("fourth", priority: .low)
            await resumed.wait { $0.last?.event.id == fourth.id }
            #expect(resumed.sequenced.last?.sequence == 7)
        }
    }

    @Test func withoutLastSeenOnlyLiveEventsArrive() async throws {
        try await withQueue { harness in
            try await harness.submit("before")
            await harness.recorder.waitForCount(2)
            let live = EventRecorder(harness.queue.events())
            let after = try await harness.submit("after")
            await live.waitForCount(1)
            await harness.shutDown()
            await live.waitForEnd()
            #expect(live.sequenced.first?.sequence == 3)
            #expect(live.events.first?.id == after.id)
            #expect(live.events.first?.type == .queued)
        }
    }

    @Test func slowSubscriberIsDroppedWithoutBlockingTheQueue() async throws {
        try await withQueue(capacity: 64, eventHistory: 4, subscriberBuffer: 2, running: false) { harness in
            let slow = harness.queue.events()
            for index in 0..<20 {
                try await harness.submit("\(index)")
            }
            #expect(harness.queue.lastEventSequence == 20)

            // It was given what fitted in its buffer, then its stream ended.
            var received: [UInt64] = []
            for await event in slow {
                received.append(event.sequence)
            }
            #expect(received == [1, 2, 3, 4, 5, 6])

            // Resuming from the last one seen replays what history still holds, newest included;
            // the jump in sequence numbers shows what was lost.
            let resumed = EventRecorder(harness.queue.events(after: 6))
            await resumed.wait { $0.last?.sequence == 20 }
            let replayed = resumed.sequenced.map(\.sequence)
            #expect(replayed.count >= 4)
            #expect(replayed == Array((21 - UInt64(replayed.count))...20))
            await harness.queue.shutdown()
            await resumed.waitForEnd()
        }
    }

    @Test func manySubscribersSeeTheSameEvents() async throws {
        try await withQueue { harness in
            let subscribers = (0..<5).map { _ in EventRecorder(harness.queue.events(after: 0)) }
            var ids: [String] = []
            for index in 0..<10 {
                ids.append(try await harness.submit("\(index)").id)
            }
            await speakAll(harness, count: 10)
            await harness.shutDown()
            for subscriber in subscribers {
                await subscriber.waitForEnd()
                #expect(subscriber.sequenced == harness.recorder.sequenced)
            }
            #expect(harness.recorder.finished.map(\.id) == ids)
        }
    }
}

@Suite("Event stream under concurrency", .timeLimit(.minutes(1)))
struct EventStreamConcurrencyTests {
    @Test func subscribersComingAndGoingWhileEventsFlow() async throws {
        await withQueue(capacity: 1000) { harness in
            let queue = harness.queue
            await withTaskGroup { group in
                group.addTask {
                    for index in 0..<300 {
                        _ = try? await queue.submit(
                            .unrendered("\(index)", priority: .low))
                    }
                }
                for subscriber in 0..<40 {
                    group.addTask {
                        let reader = Task {
                            var previous: UInt64?
                            for await event in queue.events(after: UInt64(subscriber)) {
                                // Replay then live, never out of order or repeated.
                                #expect(previous.map { event.sequence == $0 + 1 } ?? true)
                                previous = event.sequence
                            }
                        }
                        for _ in 0..<subscriber % 5 { await Task.yield() }
                        reader.cancel()
                        await reader.value
                    }
                }
            }
            await harness.shutDown()
            #expect(harness.recorder.events.filter { $0.type == .queued }.count == 300)
        }
    }

    @Test func historyKeepsOnlyTheNewestEvents() async throws {
        try await withQueue(capacity: 100, eventHistory: 10, running: false) { harness in
            for index in 0..<50 {
                try await harness.submit("\(index)")
            }
            let replay = EventRecorder(harness.queue.events(after: 0))
            await harness.queue.shutdown()
            await replay.waitForEnd()
            let sequences = replay.sequenced.map(\.sequence)
            // Shutdown added 50 finished events; the replay holds the newest ten of all of them.
            #expect(sequences.count <= 10 + 50)
            #expect(sequences.last == 100)
            #expect(sequences == Array((101 - UInt64(sequences.count))...100))
        }
    }
}
