import Foundation
import SpeechRendering

/// Known PCM to play, and the few measurements the audio output tests make on what was recorded.
public enum TestSignal {
    public static let format = AudioFormat(sampleRate: 22050, channels: 1)

    /// A sine tone of `seconds`, amplitude `amplitude`, cut into chunks of `chunk` seconds
    /// (espeak-ng's chunks are about 49 ms).
    public static func tone(
        seconds: Double, frequency: Double = 440, amplitude: Double = 8000, chunk: Double = 0.05
    ) -> [PCMChunk] {
        let rate = Double(format.sampleRate)
        let total = Int(seconds * rate)
        let samples = (0..<total).map { Int16(amplitude * sin(2 * .pi * frequency * Double($0) / rate)) }
        let size = Int(chunk * rate)
        return stride(from: 0, to: total, by: size).map {
            PCMChunk(samples: Array(samples[$0..<min($0 + size, total)]))
        }
    }

    public static func rms<C: Collection>(_ samples: C) -> Double where C.Element == Int16 {
        guard !samples.isEmpty else { return 0 }
        let sum = samples.reduce(0.0) { $0 + Double($1) * Double($1) }
        return (sum / Double(samples.count)).squareRoot()
    }

    /// The first and last sample louder than `threshold`, or nil for silence.
    public static func soundingRange(_ samples: [Int16], threshold: Int16 = 500) -> ClosedRange<Int>? {
        guard let first = samples.firstIndex(where: { abs(Int($0)) > threshold }),
            let last = samples.lastIndex(where: { abs(Int($0)) > threshold })
        else { return nil }
        return first...last
    }

    /// Windows of `window` samples inside `range` that are nearly silent: gaps (underruns) in
    /// what should be one continuous tone.
    public static func gaps(in samples: [Int16], _ range: ClosedRange<Int>, window: Int = 55) -> [Int] {
        stride(from: range.lowerBound, to: range.upperBound - window, by: window).filter {
            rms(samples[$0..<$0 + window]) < 2000
        }
    }

    /// Milliseconds from `start` to `end`.
    public static func milliseconds(_ start: ContinuousClock.Instant, _ end: ContinuousClock.Instant) -> Double {
        let duration = end - start
        return Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) * 1e-15
    }
}

/// A chunk stream that yields `chunks` as fast as they are taken, like espeak-ng does.
public func stream(_ chunks: [PCMChunk]) -> AsyncStream<PCMChunk> {
    AsyncStream { continuation in
        for chunk in chunks { continuation.yield(chunk) }
        continuation.finish()
    }
}
