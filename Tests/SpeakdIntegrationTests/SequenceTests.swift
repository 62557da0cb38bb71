import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import Testing

extension SpeakdIntegration {
    /// One message in several languages (`sequence`), heard at the sink as one announcement.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct SequenceTests {
        static var parts: [[String: Any]] {
            [
                ["language": "en", "text": "The train to Porto leaves from platform four."],
                ["language": "pt-PT", "text": "O comboio para o Porto parte da linha quatro."],
                ["language": "fr", "text": "Le train pour Porto part du quai quatre."],
            ]
        }

        @Test("A sequence is heard part after part, each as its language renders it alone, with one finished")
        func heardPartAfterPart() async throws {
            let speakd = try await AudibleDaemon.start()
            // Each part alone, as the engine renders it in its language.
            var references: [Double] = []
            for part in Self.parts { references.append(try await speakd.reference(part).soundingDuration) }
            let id = try await speakd.accept(["sequence": Self.parts, "sequenceGap": 1.2])
            #expect(await speakd.events.waitForFinished([id]))
            let recording = await speakd.stop()

            let finished = speakd.events.finished(id)
            #expect(finished.count == 1 && finished.first?.reason == .completed, "\(finished)")
            #expect(speakd.events.events.filter { $0.type == .started }.count == 1)
            let heard = recording.segments(minimumSilence: 0.8)
            #expect(heard.count == 3, "\(heard)")
            for (segment, (reference, part)) in zip(heard, zip(references, Self.parts)) {
                // In order, each as long as its language's render of it: another language's
                // rules would read the same words at another length.
                #expect(
                    abs(segment.duration - reference) < 0.15 * reference,
                    "\(part["language"] ?? ""): heard \(segment.duration) s, alone \(reference) s")
            }
            for (before, after) in zip(heard, heard.dropFirst()) {
                #expect(after.start - before.end > 1.0, "the gap: \(after.start - before.end) s")
            }
        }

        @Test("A cancel covers the whole sequence: one finished, cancelled, and nothing heard after it")
        func cancelCoversTheWhole() async throws {
            let speakd = try await AudibleDaemon.start()
            let id = try await speakd.accept(["sequence": Self.parts])
            #expect(await speakd.events.waitFor(.started, of: id) != nil)
            try await Task.sleep(for: .milliseconds(800))
            #expect(try await speakd.unix.send("DELETE", "/v1/announcements/\(id)").status == 200)
            #expect(await speakd.events.waitForFinished([id]))
            let cancelledAt = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))
            let recording = await speakd.stop()
            #expect(speakd.events.finished(id).map(\.reason) == [.cancelled])
            let last = try #require(recording.segments(minimumSilence: 0.3).last)
            let lastEnd = try #require(recording.playedAt(last.end))
            #expect(lastEnd < cancelledAt + .milliseconds(300), "sound went on after the cancel")
        }
    }
}
