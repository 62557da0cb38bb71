import SpeakTestSupport
import SpeechModel
import Testing

@testable import EspeakEngine

extension EspeakEngineTests {
    static let pitchSamples: [(language: String, text: String)] = [
        ("en-GB", "The next train to the city centre departs from platform four."),
        ("pt-PT", "O próximo comboio para Lisboa parte da linha quatro."),
    ]

    private func medianF0(_ engine: EspeakEngine, _ text: String, language: String, pitch: Double?) async throws
        -> Double
    {
        let rendering = try await engine.renderAll(
            Utterance(text, defaults: SpeechAttributes(pitch: pitch, language: tag(language))))
        return try #require(rendering.audio.medianF0())
    }

    @Test("pitch is a calibrated F0 multiplier", arguments: [0, 1])
    func pitchIsCalibrated(sample: Int) async throws {
        let engine = try await Engines.engine()
        let (language, text) = Self.pitchSamples[sample]
        let base = try await medianF0(engine, text, language: language, pitch: nil)
        var previous = 0.0
        for requested in [0.7, 0.85, 1.0, 1.2, 1.4, 1.65] {
            let ratio = try await medianF0(engine, text, language: language, pitch: requested) / base
            #expect(abs(ratio / requested - 1) <= 0.05, "\(language): pitch \(requested) measured ×\(ratio)")
            #expect(ratio > previous, "\(language): pitch \(requested) is not higher than the one below")
            previous = ratio
        }
        // Outside what espeak-ng reaches, requests are clamped to the ends.
        let highest = try await medianF0(engine, text, language: language, pitch: 2.0) / base
        let lowest = try await medianF0(engine, text, language: language, pitch: 0.0) / base
        #expect(abs(highest / PitchCalibration.maximum - 1) <= 0.05, "pitch 2.0 measured ×\(highest)")
        #expect(abs(lowest / PitchCalibration.minimum - 1) <= 0.05, "pitch 0.0 measured ×\(lowest)")
    }

    @Test func aPitchChangeInsideASentenceKeepsItsIntonation() async throws {
        let engine = try await Engines.engine()
        let texts = ["The next train to ", "Lisboa Santa Apolonia", " departs from platform four."]
        let plain = try await engine.renderAll(Utterance(spans: texts.map { Span($0) }))
        let raised = try await engine.renderAll(
            Utterance(spans: [Span(texts[0]), Span(texts[1], attributes: SpeechAttributes(pitch: 1.4)), Span(texts[2])])
        )
        let plainStarts = try plain.spanStarts.map { try #require($0) }
        let raisedStarts = try raised.spanStarts.map { try #require($0) }
        func f0(_ rendering: EspeakEngine.Rendering, _ starts: [Double], _ span: Int) throws -> Double {
            let end = span + 1 < starts.count ? starts[span + 1] : rendering.audio.duration
            return try #require(rendering.audio.medianF0(from: starts[span], to: end))
        }
        let ratios = try (0..<3).map { try f0(raised, raisedStarts, $0) / f0(plain, plainStarts, $0) }
        #expect(abs(ratios[0] - 1) <= 0.05, "span before the change: ×\(ratios[0])")
        #expect(abs(ratios[1] / 1.4 - 1) <= 0.05, "raised span: ×\(ratios[1])")
        #expect(abs(ratios[2] - 1) <= 0.05, "span after the change: ×\(ratios[2])")
        // No clause break was inserted: the sentence takes as long as without the change.
        #expect(abs(raised.audio.soundingDuration() / plain.audio.soundingDuration() - 1) <= 0.05)
        #expect(raised.audio.longestInnerSilence() < plain.audio.longestInnerSilence() + 0.05)
    }

    @Test func spansAcrossSentencesEachKeepTheirPitch() async throws {
        let engine = try await Engines.engine()
        let texts = [
            "Platform four is closed today. ", "The train to the airport is delayed. ",
            "Thank you for travelling with us today.",
        ]
        let plain = Utterance(spans: texts.map { Span($0) })
        let mixed = Utterance(spans: [
            Span(texts[0]), Span(texts[1], attributes: SpeechAttributes(pitch: 1.3)),
            Span(texts[2], attributes: SpeechAttributes(pitch: 0.8)),
        ])
        /// Each span's median F0, averaged over three renderings: espeak-ng's output varies by
        /// about 2% from one rendering to the next.
        func spanF0(_ utterance: Utterance) async throws -> [Double] {
            var sums = [Double](repeating: 0, count: 3)
            for _ in 0..<3 {
                let rendering = try await engine.renderAll(utterance)
                let starts = try rendering.spanStarts.map { try #require($0) }
                for span in 0..<3 {
                    let end = span + 1 < starts.count ? starts[span + 1] : rendering.audio.duration
                    sums[span] += try #require(rendering.audio.medianF0(from: starts[span], to: end)) / 3
                }
            }
            return sums
        }
        let plainF0 = try await spanF0(plain)
        let mixedF0 = try await spanF0(mixed)
        let ratios = (0..<3).map { mixedF0[$0] / plainF0[$0] }
        #expect(abs(ratios[0] - 1) <= 0.05, "×\(ratios[0])")
        #expect(abs(ratios[1] / 1.3 - 1) <= 0.05, "×\(ratios[1])")
        #expect(abs(ratios[2] / 0.8 - 1) <= 0.05, "×\(ratios[2])")
    }

    @Test func calibrationIsStrictlyIncreasingAndClamped() {
        var previous = -1.0
        for step in 0...200 {
            let multiplier =
                PitchCalibration.minimum + (PitchCalibration.maximum - PitchCalibration.minimum) * Double(step) / 200
            let parameter = PitchCalibration.parameter(for: multiplier)
            if step > 0 { #expect(parameter > previous, "at ×\(multiplier)") }
            previous = parameter
        }
        #expect(PitchCalibration.espeakPitch(for: 1.0) == 50)
        #expect(PitchCalibration.espeakPitch(for: 0.0) == 0)
        #expect(PitchCalibration.espeakPitch(for: 2.0) == 100)
        #expect(PitchCalibration.espeakPitch(for: .nan) == 0)
        #expect(PitchCalibration.espeakPitch(for: 1.22) == 70)
    }
}
