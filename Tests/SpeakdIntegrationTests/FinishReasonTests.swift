import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Each way an announcement can finish, with its success flag and reason, against what was heard.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct FinishReasonTests {
        static let longText =
            "Attention please the train now standing at platform nine will be divided at the next station and only the front four coaches continue to the coast"

        @Test("a default is completed: success true, heard in full once")
        func completed() async throws {
            let speakd = try await AudibleDaemon.start()
            let body = announcement("Doors closing", priority: .default)
            let reference = try await speakd.reference(body)
            let id = try await speakd.accept(body, via: speakd.tcp)
            #expect(await speakd.events.waitForFinished([id]))
            let recording = await speakd.stop()

            let finished = speakd.events.finished(id)
            #expect(finished.count == 1)
            #expect(finished.first?.success == true)
            #expect(finished.first?.reason == .completed)
            #expect(finished.first?.text == "Doors closing")
            #expect(
                speakd.events.events(for: id).filter { !$0.type.isProgress }.map(\.type) == [
                    .queued, .started, .finished,
                ])
            let segments = recording.segments()
            try #require(segments.count == 1, "heard \(segments)")
            #expect(
                abs(segments[0].duration - reference.soundingDuration) < 0.2,
                "heard \(segments[0]), rendered \(reference.soundingDuration) s")
            expectExactlyOneFinished([id], in: speakd.events.events)
        }

        /// How the interrupting announcement is posted.
        enum Interrupter: String, CaseIterable, Sendable {
            case high
            case defaultNotQueued

            var body: [String: Any] {
                switch self {
                case .high: announcement("Platform change", pitch: 1.6, priority: .high)
                case .defaultNotQueued: announcement("Platform change", pitch: 1.6, priority: .default, queue: false)
                }
            }
        }

        @Test(
            "a high, or a default with queue false, interrupts a speaking default; the recording shows it stop",
            arguments: Interrupter.allCases)
        func interrupted(by interrupter: Interrupter) async throws {
            let speakd = try await AudibleDaemon.start()
            let speakingBody = announcement(Self.longText, pitch: 0.7, priority: .default)
            let speakingReference = try await speakd.reference(speakingBody)
            let interrupterReference = try await speakd.reference(interrupter.body)
            let lowF0 = try #require(speakingReference.medianF0)
            let highF0 = try #require(interrupterReference.medianF0)
            try #require(highF0 / lowF0 > 1.6, "pitches \(lowF0) and \(highF0) Hz are too close to tell apart")
            let boundary = (lowF0 * highF0).squareRoot()

            let speaking = try await speakd.accept(speakingBody, via: speakd.unix)
            _ = try #require(await speakd.events.waitFor(.started, of: speaking))
            try await Task.sleep(for: .seconds(1.2))
            let posted = ContinuousClock.now
            let interrupting = try await speakd.accept(interrupter.body, via: speakd.tcp)
            #expect(await speakd.events.waitForFinished([speaking, interrupting]))
            try await Task.sleep(for: .milliseconds(300))
            let recording = await speakd.stop()

            let stopped = speakd.events.finished(speaking).first
            #expect(stopped?.success == false)
            #expect(stopped?.reason == .interrupted)
            let completed = speakd.events.finished(interrupting).first
            #expect(completed?.success == true && completed?.reason == .completed)
            #expect(speakd.events.events.filter { $0.type == .started }.map(\.id) == [speaking, interrupting])
            expectExactlyOneFinished([speaking, interrupting], in: speakd.events.events)

            // Heard: the low voice until about the moment of the interrupting post, then only the high one.
            let postedAt = try #require(recording.time(of: posted))
            let frames = recording.analysis.pitchTrack()
            let lowFramesLate = frames.filter { $0.f0 < boundary && $0.time > postedAt + 0.4 }
            let highFrames = frames.filter { $0.f0 >= boundary && $0.time > postedAt }
            #expect(highFrames.count > 20, "the interrupting announcement was not heard after it was posted")
            #expect(
                lowFramesLate.count <= max(3, highFrames.count / 20),
                "the interrupted voice went on: \(lowFramesLate.count) frames after \(postedAt + 0.4) s")
            let segments = recording.segments()
            let firstSound = try #require(segments.first).start
            let heardTotal = recording.totalSoundingTime
            let expectedTotal = (postedAt - firstSound) + interrupterReference.soundingDuration
            #expect(
                heardTotal < speakingReference.soundingDuration - 1.5,
                "the interrupted one was heard almost in full: \(heardTotal) s")
            #expect(
                abs(heardTotal - expectedTotal) < 0.5,
                "heard \(heardTotal) s of sound; expected about \(expectedTotal) s")
        }

        @Test("cancel one waiting and one speaking: both cancelled, the sound stops at once")
        func cancelled() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("FinishReasonTests.cancelled") { timing in
                let speakd = try await AudibleDaemon.start()
                let speakingBody = announcement(Self.longText, priority: .default)
                let reference = try await speakd.reference(speakingBody)
                let speaking = try await speakd.accept(speakingBody, via: speakd.unix)
                let waiting = try await speakd.accept(
                    announcement("Next stop Central", priority: .default), via: speakd.tcp)
                _ = try #require(await speakd.events.waitFor(.started, of: speaking))
                try await Task.sleep(for: .seconds(1))

                let cancelWaiting = try await speakd.tcp.send("DELETE", "/v1/announcements/\(waiting)")
                #expect(cancelWaiting.status == 200)
                #expect(try cancelWaiting.decode(CancelResult.self).cancelled == 1)
                let cancelledAt = ContinuousClock.now
                let cancelSpeaking = try await speakd.unix.send("DELETE", "/v1/announcements/\(speaking)")
                #expect(try cancelSpeaking.decode(CancelResult.self).cancelled == 1)
                #expect(await speakd.events.waitForFinished([speaking, waiting]))

                // Cancelling again, or an unknown id.
                #expect(
                    try await speakd.unix.send("DELETE", "/v1/announcements/\(speaking)").decode(CancelResult.self)
                        .cancelled == 0)
                let unknown = try await speakd.unix.send("DELETE", "/v1/announcements/000000000000")
                #expect(unknown.status == 404)
                #expect(unknown.error?.error.code == ErrorResponse.Code.unknownAnnouncement)

                try await Task.sleep(for: .milliseconds(500))
                let recording = await speakd.stop()

                for id in [speaking, waiting] {
                    let finished = speakd.events.finished(id).first
                    #expect(
                        finished?.success == false && finished?.reason == .cancelled,
                        "\(id): \(String(describing: finished))")
                }
                #expect(speakd.events.first(.started, of: waiting) == nil)
                expectExactlyOneFinished([speaking, waiting], in: speakd.events.events)

                let segments = recording.segments()
                try #require(segments.count == 1, "heard \(segments)")
                let lastSound = try #require(recording.playedAt(segments[0].end))
                let silentAfter = (lastSound - cancelledAt).seconds
                // The goal is 10 ms (measured by the latency benchmark); this bounds it on two loaded cores.
                timing.check(
                    silentAfter < 0.25,
                    "sound went on \(silentAfter * 1000) ms after the cancel was sent, not under 250 ms")
                #expect(
                    segments[0].duration < reference.soundingDuration - 1.5,
                    "heard \(segments[0]) of \(reference.soundingDuration) s")
            }
            #expect(misses.isEmpty, "\(misses)")
        }

        @Test("a waiting announcement whose expiresAfter passes while another speaks is expired, never started")
        func expired() async throws {
            let speakd = try await AudibleDaemon.start()
            let speakingBody = announcement(Self.longText, priority: .default)
            let reference = try await speakd.reference(speakingBody)
            let speaking = try await speakd.accept(speakingBody, via: speakd.unix)
            _ = try #require(await speakd.events.waitFor(.started, of: speaking))
            let posted = ContinuousClock.now
            let expiring = try await speakd.accept(
                announcement("Last call for boarding", priority: .low, expiresAfter: 1), via: speakd.tcp)
            #expect(await speakd.events.waitForFinished([speaking, expiring]))
            let recording = await speakd.stop()

            let expiredEvent = try #require(speakd.events.first(.finished, of: expiring))
            #expect(expiredEvent.event.success == false && expiredEvent.event.reason == .expired)
            let after = (expiredEvent.receivedAt - posted).seconds
            #expect(after > 0.9 && after < 2.5, "expired \(after) s after it was posted; expiresAfter was 1 s")
            let speakingFinished = try #require(speakd.events.first(.finished, of: speaking))
            #expect(
                expiredEvent.receivedAt < speakingFinished.receivedAt, "expired only once the speaking one had finished"
            )
            #expect(speakingFinished.event.reason == .completed && speakingFinished.event.success == true)
            #expect(speakd.events.first(.started, of: expiring) == nil)
            expectExactlyOneFinished([speaking, expiring], in: speakd.events.events)

            let segments = recording.segments()
            try #require(segments.count == 1, "heard \(segments)")
            #expect(abs(segments[0].duration - reference.soundingDuration) < 0.2 + 0.05 * reference.soundingDuration)
        }

        @Test(
            "a full queue: a high displaces the newest low (discarded); with nothing lower a post is refused with 429 and no events"
        )
        func discardedAndRefused() async throws {
            let speakd = try await AudibleDaemon.start(arguments: ["--max-queue", "2"])
            let blocker = try await speakd.accept(announcement("Service update for all passengers", priority: .high))
            _ = try #require(await speakd.events.waitFor(.started, of: blocker))
            let olderLow = try await speakd.accept(announcement("Low one", priority: .low), via: speakd.tcp)
            let newerLow = try await speakd.accept(announcement("Low two", priority: .low), via: speakd.unix)
            let high = try await speakd.accept(announcement("High one", priority: .high), via: speakd.tcp)

            let discarded = try #require(await speakd.events.waitFor(.finished, of: newerLow, timeout: .seconds(5)))
            #expect(discarded.event.success == false && discarded.event.reason == .discarded)
            #expect(speakd.events.finished(olderLow).isEmpty, "the older low was dropped instead of the newest")

            // Waiting now: high, older low. A low has nothing lower to displace.
            let refusedLow = try await post(announcement("Refused low", priority: .low), via: speakd.unix)
            #expect(refusedLow.status == 429)
            #expect(refusedLow.header("content-type")?.hasPrefix("application/json") == true)
            #expect(refusedLow.error?.error.code == ErrorResponse.Code.queueFull)
            #expect(refusedLow.error?.error.message.isEmpty == false)

            // A default displaces the older low; then another default finds only equals and is refused.
            let firstDefault = try await speakd.accept(announcement("Default one", priority: .default), via: speakd.tcp)
            let displaced = try #require(await speakd.events.waitFor(.finished, of: olderLow, timeout: .seconds(5)))
            #expect(displaced.event.success == false && displaced.event.reason == .discarded)
            let refusedDefault = try await post(announcement("Refused default", priority: .default), via: speakd.tcp)
            #expect(refusedDefault.status == 429)
            #expect(refusedDefault.error?.error.code == ErrorResponse.Code.queueFull)

            let accepted = [blocker, olderLow, newerLow, high, firstDefault]
            #expect(await speakd.events.waitForFinished(accepted))
            let recording = await speakd.stop()

            let events = speakd.events.events
            #expect(!events.contains { $0.text.hasPrefix("Refused") }, "a refused announcement has events")
            #expect(events.filter { $0.type == .started }.map(\.id) == [blocker, high, firstDefault])
            for id in [blocker, high, firstDefault] {
                #expect(speakd.events.finished(id).first?.reason == .completed)
            }
            expectExactlyOneFinished(accepted, in: events)
            #expect(recording.segments().count == 3, "heard \(recording.segments())")
        }
    }
}
