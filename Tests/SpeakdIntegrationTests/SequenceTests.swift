import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
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

        /// How well `reference` is found in `heard`, both from their first sound: at four places
        /// through the reference's sound (20, 40, 60 and 80%), the best normalised correlation of a
        /// 2,048-sample window within 0.15 s either side of the same place in `heard`, averaged.
        /// espeak-ng renders a text alike each time (its noise aside), so its own language's
        /// rendering is found near 1 at every place; another language's rules read the same letters
        /// as other sounds, found at one place perhaps (a name said alike), not at all four.
        static func similarity(_ heard: AudioAnalysis, _ reference: AudioAnalysis) -> Double {
            func onset(_ audio: AudioAnalysis) -> Int {
                let first = audio.soundingSegments(
                    minimumSilence: 0.01, silenceLevel: Recording.silenceLevel, minimumSound: 0
                ).first
                return Int((first?.start ?? 0) * Double(audio.sampleRate))
            }
            let window = 2048
            let sound = Rendered(analysis: reference).soundingDuration * Double(reference.sampleRate)
            var total = 0.0
            let places = [0.2, 0.4, 0.6, 0.8]
            for place in places {
                let at = onset(reference) + Int(place * sound)
                guard at + window <= reference.samples.count else { continue }
                total += heard.bestCorrelation(
                    of: reference.samples[at..<(at + window)], near: onset(heard) + (at - onset(reference)),
                    within: reference.sampleRate * 15 / 100)
            }
            return total / Double(places.count)
        }

        @Test("A sequence is heard part after part, each as its language renders it alone, with one finished")
        func heardPartAfterPart() async throws {
            let speakd = try await AudibleDaemon.start()
            // Each part alone, as the engine renders it in its language; and read by the rules of
            // each other language of the sequence, for the language oracle below.
            let languages = Self.parts.compactMap { $0["language"] as? String }
            var references: [Double] = []
            var readings: [[String: AudioAnalysis]] = []
            for part in Self.parts {
                var reading: [String: AudioAnalysis] = [:]
                for language in languages {
                    reading[language] = try await speakd.reference(part.merging(["language": language]) { $1 }).analysis
                }
                let language = try #require(part["language"] as? String)
                let own = try #require(reading[language])
                references.append(Rendered(analysis: own).soundingDuration)
                readings.append(reading)
            }
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
            // The language oracle: each part heard is its own language's reading of its text, found
            // sample for sample, and not another language's reading of the same text.
            for (index, segment) in heard.enumerated() where index < Self.parts.count {
                let own = try #require(Self.parts[index]["language"] as? String)
                let part = recording.analysis.slice(from: max(0, segment.start - 0.05), to: segment.end + 0.05)
                #expect(part.sampleRate == readings[index][own]?.sampleRate)
                let scores = readings[index].mapValues { Self.similarity(part, $0) }
                let ownScore = scores[own] ?? 0
                let others = scores.filter { $0.key != own }.values.max() ?? 0
                #expect(ownScore > 0.7 && others < ownScore - 0.2, "part \(index) (\(own)): \(scores)")
            }
        }

        @Test("A cancel covers the whole sequence: one finished, cancelled, and nothing heard after it")
        func cancelCoversTheWhole() async throws {
            // Timed at the sink: run once more, with the reason printed, when a figure misses its
            // bound (retryingSinkTimingOnce); the bounds are as they are.
            let misses = try await retryingSinkTimingOnce("SequenceTests.cancelCoversTheWhole") { timing in
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
                timing.check(
                    lastEnd < cancelledAt + .milliseconds(300),
                    "sound went on \((lastEnd - cancelledAt).seconds) s after the cancel, not under 0.3 s")
            }
            #expect(misses.isEmpty, "\(misses)")
        }
    }
}
