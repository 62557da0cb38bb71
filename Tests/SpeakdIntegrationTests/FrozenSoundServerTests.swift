import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// The reported sequence against the built `speakd` with its default time limits: a long
    /// announcement plays, the PulseAudio server is frozen (SIGSTOP), the announcement is
    /// cancelled, and the server resumes (SIGCONT) after a stall shorter and longer than the
    /// 2 s call limit. speakd used to stay 503 for ever after the longer stalls.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct FrozenSoundServerTests {
        static let longText =
            "Attention please the train now standing at platform nine will be divided at the next station and only the front four coaches continue to the coast"

        @Test("cancelling while the sound server is frozen: cancelled once, healthy and speaking again within 1 s")
        func cancelWhileFrozen() async throws {
            let speakd = try await AudibleDaemon.start()
            var accepted: [String] = []
            for stall in [Duration.milliseconds(1200), .milliseconds(2500), .milliseconds(2500)] {
                let label = "stall of \(stall)"
                let id = try await speakd.accept(announcement(Self.longText))
                accepted.append(id)
                _ = try #require(await speakd.events.waitFor(.started, of: id, timeout: .seconds(10)))
                try await Task.sleep(for: .milliseconds(400))
                speakd.pulse.suspend()
                let cancelled = try await speakd.unix.send("DELETE", "/v1/announcements/\(id)")
                #expect(cancelled.status == 200, "\(label)")
                try await Task.sleep(for: stall)
                speakd.pulse.resume()
                let answered = ContinuousClock.now

                #expect(await speakd.events.waitForFinished([id], timeout: .seconds(10)), "\(label)")
                let finished = speakd.events.finished(id)
                #expect(finished.count == 1, "\(label): \(finished)")
                #expect(finished.first?.reason == .cancelled, "\(label): \(finished)")

                var healthy: ContinuousClock.Instant?
                let deadline = ContinuousClock.now + .seconds(5)
                while healthy == nil, ContinuousClock.now < deadline {
                    if try await speakd.tcp.send("GET", "/healthz").status == 200 { healthy = .now }
                    try await Task.sleep(for: .milliseconds(10))
                }
                let backHealthy = try #require(healthy, "\(label): /healthz never answered 200 again")
                let toHealthy = (backHealthy - answered).seconds
                #expect(toHealthy < 1.0, "\(label): healthy \(toHealthy) s after SIGCONT")
                let posted = ContinuousClock.now
                let back = try await speakd.accept(announcement("Back again"))
                accepted.append(back)
                try await Self.heardAgain(
                    back, speakd, answered: answered, posted: posted,
                    label: "\(label), healthz 200 after \(Int(toHealthy * 1000)) ms")
            }
            _ = await speakd.stop()
            expectExactlyOneFinished(accepted, in: speakd.events.events)
        }

        /// Checks that `back`, posted at `posted`, completes and is heard within 1 s of `answered`.
        static func heardAgain(
            _ back: String, _ speakd: AudibleDaemon, answered: ContinuousClock.Instant,
            posted: ContinuousClock.Instant, label: String
        ) async throws {
            #expect(await speakd.events.waitForFinished([back], timeout: .seconds(10)), "\(label)")
            #expect(
                speakd.events.finished(back).first?.reason == .completed,
                "\(label): \(speakd.events.finished(back)); log:\n\(speakd.daemon.log)")
            try await Task.sleep(for: .milliseconds(150))

            let heard = try #require(
                speakd.recorder.firstSoundArrival(after: posted, silenceLevel: Recording.silenceLevel),
                "\(label): nothing heard after the post")
            let toHeard = (heard - answered).seconds
            print(
                "measured: speakd, \(label); SIGCONT → speech heard \(Int(toHeard * 1000)) ms"
            )
            #expect(toHeard > 0 && toHeard < 1.0, "\(label)")
        }
    }
}
