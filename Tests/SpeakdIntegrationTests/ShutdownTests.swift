import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct ShutdownTests {
        @Test("SIGTERM while announcements wait: all finish with shutdown, the socket goes, exit 0 within 5 s")
        func sigterm() async throws {
            let speakd = try await AudibleDaemon.start()
            let ids = [
                try await speakd.accept(announcement(SpeakdIntegration.FinishReasonTests.longText, priority: .high)),
                try await speakd.accept(announcement("Second announcement"), via: speakd.tcp),
                try await speakd.accept(announcement("Third announcement", priority: .low)),
            ]
            _ = try #require(await speakd.events.waitFor(.started, of: ids[0]))
            try await Task.sleep(for: .milliseconds(800))
            #expect(FileManager.default.fileExists(atPath: speakd.daemon.socketPath))

            let signalled = ContinuousClock.now
            let (status, took) = await speakd.daemon.stop(signal: SIGTERM)
            #expect(status == 0, "log:\n\(speakd.daemon.log)")
            #expect(took < .seconds(5), "took \(took) to exit")
            #expect(!FileManager.default.fileExists(atPath: speakd.daemon.socketPath), "the socket file is still there")
            #expect(await speakd.events.waitForFinished(ids, timeout: .seconds(5)))
            let recording = await speakd.stop()

            for id in ids {
                let finished = speakd.events.finished(id).first
                #expect(
                    finished?.success == false && finished?.reason == .shutdown,
                    "\(id): \(String(describing: finished))")
            }
            expectExactlyOneFinished(ids, in: speakd.events.events)
            #expect(speakd.events.first(.started, of: ids[1]) == nil)
            // The speaking one was cut off, not played to its end.
            let segments = recording.segments()
            try #require(segments.count == 1, "heard \(segments)")
            let lastSound = try #require(recording.playedAt(segments[0].end))
            #expect(
                (lastSound - signalled).seconds < 0.5,
                "sound went on \((lastSound - signalled).seconds) s after SIGTERM")
        }
    }
}
