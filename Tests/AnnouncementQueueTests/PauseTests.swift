import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import Testing

/// Pause and resume in the queue's state machine, with a fake speaker and a manual clock.
@Suite(.timeLimit(.minutes(1)))
struct PauseTests {
    @Test func pauseAndResumeSendEventsAndChangeTheState() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let paused = try await harness.queue.pause(id: speaking.id)
            #expect(paused.state == .paused)
            #expect(await harness.queue.snapshot().first?.state == .paused)
            #expect(harness.speaker.pauseCalls == (1, 0))

            let resumed = try await harness.queue.resume()
            #expect(resumed.state == .speaking)
            #expect(harness.speaker.pauseCalls == (1, 1))
            harness.speaker.complete(speaking.id)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .completed)
            await harness.shutDown()
            #expect(harness.recorder.events.map(\.type) == [.queued, .started, .paused, .resumed, .finished])
        }
    }

    @Test func refusalsNameWhatIsWrong() async throws {
        try await withQueue { harness in
            await #expect(throws: AnnouncementQueueError.notSpeaking("")) { try await harness.queue.pause() }
            await #expect(throws: AnnouncementQueueError.unknownAnnouncement("nope")) {
                try await harness.queue.pause(id: "nope")
            }
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            let waiting = try await harness.submit("waiting")
            await #expect(throws: AnnouncementQueueError.notSpeaking("")) {
                try await harness.queue.pause(id: waiting.id)
            }
            await #expect(throws: AnnouncementQueueError.notPaused("")) {
                try await harness.queue.resume(id: speaking.id)
            }
            await #expect(throws: AnnouncementQueueError.notPaused("")) {
                try await harness.queue.resume(id: waiting.id)
            }
            try await harness.queue.pause(id: speaking.id)
            await #expect(throws: AnnouncementQueueError.notSpeaking("")) {
                try await harness.queue.pause(id: speaking.id)
            }
            harness.speaker.complete(speaking.id)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .completed)
            await #expect(throws: AnnouncementQueueError.notSpeaking("")) {
                try await harness.queue.pause(id: speaking.id)
            }
            await #expect(throws: AnnouncementQueueError.notPaused("")) {
                try await harness.queue.resume(id: speaking.id)
            }
        }
    }

    @Test func aHighInterruptsAPausedOneAndWaitingOnesStillExpire() async throws {
        try await withQueue { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            try await harness.queue.pause()
            let expiring = try await harness.submit("expiring", priority: .low, expiresAfter: 5)
            await harness.clock.waitForSleepers(2)
            harness.clock.advance(by: .seconds(5))
            #expect(await harness.recorder.waitForFinished(expiring.id)?.reason == .expired)
            #expect(await harness.queue.status(id: speaking.id)?.state == .paused)

            let urgent = try await harness.submit("urgent", priority: .high)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .interrupted)
            await harness.speaker.waitForStarts(2)
            harness.speaker.complete(urgent.id)
            #expect(await harness.recorder.waitForFinished(urgent.id)?.reason == .completed)
            await harness.shutDown()
            #expect(harness.recorder.events.filter { $0.type == .finished }.count == 3)
        }
    }

    @Test func cancelAndShutdownFinishAPausedOne() async throws {
        try await withQueue { harness in
            let first = try await harness.submit("first")
            await harness.speaker.waitForStarts(1)
            try await harness.queue.pause()
            #expect(try await harness.queue.cancel(id: first.id))
            #expect(await harness.recorder.waitForFinished(first.id)?.reason == .cancelled)

            let second = try await harness.submit("second")
            await harness.speaker.waitForStarts(2)
            try await harness.queue.pause()
            await harness.shutDown()
            #expect(harness.recorder.finished(second.id)?.reason == .shutdown)
            #expect(harness.recorder.events.filter { $0.type == .finished }.count == 2)
        }
    }

    @Test func aLongPauseFinishesInterruptedAfterTheTimeout() async throws {
        try await withQueue(pauseTimeout: .seconds(30)) { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            try await harness.queue.pause()
            await harness.clock.waitForSleepers(1)
            harness.clock.advance(by: .seconds(29))
            #expect(await harness.queue.status(id: speaking.id)?.state == .paused)
            harness.clock.advance(by: .seconds(1))
            let finished = await harness.recorder.waitForFinished(speaking.id)
            #expect(finished?.reason == .interrupted)
            #expect(finished?.detail?.contains("pause timeout") == true)
        }
    }

    @Test func resumingCancelsTheTimeout() async throws {
        try await withQueue(pauseTimeout: .seconds(30)) { harness in
            let speaking = try await harness.submit("speaking")
            await harness.speaker.waitForStarts(1)
            try await harness.queue.pause()
            await harness.clock.waitForSleepers(1)
            try await harness.queue.resume()
            harness.clock.advance(by: .seconds(60))
            #expect(await harness.queue.status(id: speaking.id)?.state == .speaking)
            harness.speaker.complete(speaking.id)
            #expect(await harness.recorder.waitForFinished(speaking.id)?.reason == .completed)
        }
    }
}
