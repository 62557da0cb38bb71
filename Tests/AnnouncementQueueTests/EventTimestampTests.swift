import FoundationEssentials
import SpeakAPI
import SpeechModel
import Synchronization
import Testing

@testable import AnnouncementQueue

/// Each event's `timestamp` is the time of what it reports: `started` the first audible
/// sample, a word its sample, `finished` the end of the last sound; not when the queue handed
/// the announcement to the speaker.
@Suite("Event timestamps", .timeLimit(.minutes(1)))
struct EventTimestampTests {
    /// A speaker whose sound starts late (a cold engine, a sink that starts late): it reports
    /// each instant as a sink estimates it, a little before the call, as playback does.
    final class LateSoundSpeaker: AnnouncementSpeaker {
        struct Times {
            var dequeued: Date?
            var heard: Date?
            var word: Date?
            var lastSound: Date?
        }

        let delay: Duration
        let times = Mutex(Times())

        init(delay: Duration) {
            self.delay = delay
        }

        func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
            try await speak(announcement, listener: SpeechListener())
        }

        func speak(_ announcement: Announcement, listener: SpeechListener) async throws -> SpeechOutcome {
            times.withLock { $0.dequeued = Date() }
            try await Task.sleep(for: delay)
            let heard = ContinuousClock.now - .milliseconds(2)
            times.withLock { $0.heard = date(of: heard) }
            listener.firstSound(heard)
            try await Task.sleep(for: .milliseconds(50))
            let word = ContinuousClock.now - .milliseconds(2)
            times.withLock { $0.word = date(of: word) }
            listener.progress(SpeechProgress(kind: .word, word: "hello", heardAt: word))
            try await Task.sleep(for: .milliseconds(100))
            // A trailing pause of 40 ms after the last sound, played before returning.
            let ended = ContinuousClock.now - .milliseconds(40)
            times.withLock { $0.lastSound = date(of: ended) }
            listener.lastSound(ended)
            return SpeechOutcome()
        }

        func waitUntilAvailable() async {}
    }

    @Test func startedWordAndFinishedAreDatedByTheirSoundNotByTheDequeue() async throws {
        let speaker = LateSoundSpeaker(delay: .milliseconds(300))
        let queue = AnnouncementQueue(speaker: speaker)
        let recorder = EventRecorder(queue.events(after: 0, progress: true))
        let runner = Task { await queue.run() }
        let accepted = try await queue.submit(PreparedAnnouncement(speech: .unrendered("hello")))
        let finished = try #require(await recorder.waitForFinished(accepted.id))
        await queue.shutdown()
        await runner.value

        let times = speaker.times.withLock { $0 }
        let dequeued = try #require(times.dequeued)
        let heard = try #require(times.heard)
        let started = try #require(recorder.events.first { $0.type == .started })
        #expect(
            abs(started.timestamp.timeIntervalSince(heard)) < 0.005,
            "started dated \(started.timestamp.timeIntervalSince(heard) * 1000) ms from its first audible sample")
        #expect(
            started.timestamp.timeIntervalSince(dequeued) > 0.25,
            "started dated \(started.timestamp.timeIntervalSince(dequeued) * 1000) ms after the dequeue")
        let word = try #require(recorder.events.first { $0.type == .word })
        #expect(abs(word.timestamp.timeIntervalSince(try #require(times.word))) < 0.005)
        #expect(finished.reason == .completed)
        #expect(abs(finished.timestamp.timeIntervalSince(try #require(times.lastSound))) < 0.005)
    }

    /// One that ends before any sound (cancelled while its engine renders) is dated by when it
    /// ended: `started` and `finished` alike, never by its dequeue.
    @Test func oneCancelledBeforeItsSoundIsDatedByItsEnd() async throws {
        let speaker = LateSoundSpeaker(delay: .seconds(30))
        let queue = AnnouncementQueue(speaker: speaker)
        let recorder = EventRecorder(queue.events(after: 0))
        let runner = Task { await queue.run() }
        let accepted = try await queue.submit(PreparedAnnouncement(speech: .unrendered("hello")))
        await recorder.wait { events in events.contains { $0.event.type == .queued } }
        while speaker.times.withLock({ $0.dequeued }) == nil { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelledAt = Date()
        try await queue.cancel(id: accepted.id)
        let finished = try #require(await recorder.waitForFinished(accepted.id))
        await queue.shutdown()
        await runner.value

        #expect(finished.reason == .cancelled)
        let started = try #require(recorder.events.first { $0.type == .started })
        #expect(started.timestamp >= cancelledAt && finished.timestamp >= started.timestamp)
    }
}

/// The wall-clock time of a monotonic instant.
private func date(of instant: ContinuousClock.Instant) -> Date {
    let offset = ContinuousClock.now.duration(to: instant)
    return Date(
        timeIntervalSinceNow: Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18)
}
