import Foundation
import SpeakTestSupport
import Testing

/// The analysis that the engine tests (and recordings from the audio tests) rely on, checked
/// against synthetic signals whose pitch and timing are known exactly.
@Suite struct AudioAnalysisTests {
    static let rate = 22050

    /// A tone with a few harmonics (like a voiced vowel) at `f0` Hz for `seconds`.
    static func tone(_ f0: Double, seconds: Double, level: Double = 0.3) -> [Int16] {
        (0..<Int(seconds * Double(rate))).map { index in
            let t = Double(index) / Double(rate)
            let value = sin(2 * .pi * f0 * t) + 0.5 * sin(4 * .pi * f0 * t) + 0.25 * sin(6 * .pi * f0 * t)
            return Int16(value / 1.75 * level * 32767)
        }
    }

    static func silence(_ seconds: Double) -> [Int16] { Array(repeating: 0, count: Int(seconds * Double(rate))) }

    @Test(arguments: [70.0, 100.0, 123.4, 170.0, 240.0])
    func medianF0OfATone(f0: Double) throws {
        let audio = AudioAnalysis(samples: Self.tone(f0, seconds: 0.5), sampleRate: Self.rate)
        let measured = try #require(audio.medianF0())
        #expect(abs(measured / f0 - 1) < 0.01, "\(measured) Hz for \(f0) Hz")
    }

    @Test func silenceAndNoiseHaveNoPitch() {
        #expect(AudioAnalysis(samples: Self.silence(0.5), sampleRate: Self.rate).medianF0() == nil)
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<Self.rate / 2).map { _ in Int16.random(in: -8000...8000, using: &generator) }
        #expect(AudioAnalysis(samples: noise, sampleRate: Self.rate).pitchTrack().count < 5)
    }

    @Test func segmentsAndDurations() throws {
        let samples =
            Self.silence(0.2) + Self.tone(120, seconds: 0.5) + Self.silence(0.6) + Self.tone(150, seconds: 0.3)
            + Self.silence(0.1) + Self.tone(150, seconds: 0.2) + Self.silence(0.3)
        let audio = AudioAnalysis(samples: samples, sampleRate: Self.rate)
        #expect(abs(audio.duration - 2.2) < 0.001)
        let segments = audio.soundingSegments(minimumSilence: 0.5)
        #expect(segments.count == 2)
        let first = try #require(segments.first)
        let second = try #require(segments.last)
        #expect(abs(first.start - 0.2) < 0.011 && abs(first.end - 0.7) < 0.011, "\(first)")
        #expect(abs(second.start - 1.3) < 0.011 && abs(second.end - 1.9) < 0.011, "\(second)")
        // With a shorter minimum silence, the 0.1 s gap splits the second segment.
        #expect(audio.soundingSegments(minimumSilence: 0.05).count == 3)
        #expect(abs(audio.soundingDuration() - 1.7) < 0.02)
        #expect(abs(audio.longestInnerSilence() - 0.6) < 0.02)
        #expect(abs(try #require(audio.medianF0(from: 0, to: 1)) - 120) < 1.5)
        #expect(abs(try #require(audio.medianF0(from: 1, to: 2.2)) - 150) < 1.5)
        #expect(abs(audio.slice(from: 0.2, to: 0.7).rms - 0.3 * sqrt(1.3125) / 1.75 / sqrt(2)) < 0.01)
    }
}
