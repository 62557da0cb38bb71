/// Measurements of 16-bit mono PCM: loudness, pitch, and where sound starts and stops.
///
/// Works on rendered audio and on recordings alike (a null-sink monitor recorded with `parec`),
/// so tests can assert on what was heard: median F0 of voiced frames, RMS, and the sounding
/// segments between silences.
public struct AudioAnalysis: Sendable {
    /// A stretch of sound between two silences, in seconds from the start.
    public struct Segment: Sendable, Hashable, CustomStringConvertible {
        /// Where the sound starts, in seconds.
        public var start: Double
        /// Where the sound ends, in seconds.
        public var end: Double
        /// Length in seconds.
        public var duration: Double { end - start }

        /// A segment from `start` to `end` seconds.
        public init(start: Double, end: Double) {
            self.start = start
            self.end = end
        }

        public var description: String {
            "\(Self.format(start))–\(Self.format(end)) s"
        }

        private static func format(_ value: Double) -> String {
            String(Double(Int((value * 1000).rounded())) / 1000)
        }
    }

    /// One analysis frame's pitch estimate.
    public struct PitchFrame: Sendable, Hashable {
        /// Centre of the frame, in seconds.
        public var time: Double
        /// Fundamental frequency in Hz.
        public var f0: Double
    }

    /// 16-bit mono samples.
    public let samples: [Int16]
    /// Samples per second.
    public let sampleRate: Int

    /// Analyses `samples`, taken at `sampleRate` Hz.
    public init(samples: [Int16], sampleRate: Int) {
        precondition(sampleRate > 0, "sample rate must be positive")
        self.samples = samples
        self.sampleRate = sampleRate
    }

    /// Length in seconds.
    public var duration: Double { Double(samples.count) / Double(sampleRate) }

    /// The sample index at `time` seconds, clamped to the audio.
    public func index(at time: Double) -> Int {
        min(max(0, Int((time * Double(sampleRate)).rounded())), samples.count)
    }

    /// The samples between two times, in seconds.
    public func slice(from start: Double, to end: Double) -> AudioAnalysis {
        AudioAnalysis(
            samples: Array(samples[index(at: start)..<max(index(at: start), index(at: end))]), sampleRate: sampleRate)
    }

    /// Root mean square level relative to full scale (0 silence, 1 a full-scale square wave).
    public var rms: Double { Self.rms(samples[...]) }

    /// Where `pattern` (another rendering's stretch) is found in these samples: the best normalised
    /// correlation with a stretch of them starting within `search` samples either side of
    /// `expected`; 1 is the same waveform at any level, 0 nothing like it or no stretch that fits.
    public func bestCorrelation(of pattern: ArraySlice<Int16>, near expected: Int, within search: Int) -> Double {
        let pattern = pattern.map(Double.init)
        let patternEnergy = pattern.reduce(0) { $0 + $1 * $1 }
        guard patternEnergy > 0 else { return 0 }
        var best = 0.0
        for start in max(0, expected - search)...max(0, expected + search) {
            guard start + pattern.count <= samples.count else { break }
            var dot = 0.0
            var energy = 0.0
            for index in pattern.indices {
                let x = Double(samples[start + index])
                dot += x * pattern[index]
                energy += x * x
            }
            if energy > 0 { best = max(best, dot / (energy * patternEnergy).squareRoot()) }
        }
        return best
    }

    /// Peak absolute level relative to full scale.
    public var peak: Double {
        Double(samples.lazy.map { abs(Int($0)) }.max() ?? 0) / 32768
    }

    /// Pitch of every voiced frame, estimated with YIN (de Cheveigné & Kawahara, 2002).
    ///
    /// A frame counts as voiced when it is louder than `minimumLevel` (RMS, relative to full
    /// scale) and its cumulative-mean-normalised difference dips below `threshold`.
    /// - Parameters:
    ///   - range: the F0 search range in Hz; 60–500 covers espeak-ng's voices at every pitch setting.
    ///   - frameLength: analysis window in seconds.
    ///   - hop: distance between frames in seconds.
    public func pitchTrack(
        range: ClosedRange<Double> = 60...500, frameLength: Double = 0.025, hop: Double = 0.01,
        threshold: Double = 0.15, minimumLevel: Double = 0.01
    ) -> [PitchFrame] {
        let window = max(1, Int(frameLength * Double(sampleRate)))
        let minLag = max(2, Int(Double(sampleRate) / range.upperBound))
        let maxLag = Int(Double(sampleRate) / range.lowerBound) + 1
        let step = max(1, Int(hop * Double(sampleRate)))
        guard samples.count >= window + maxLag + 1 else { return [] }
        let signal = samples.map { Float($0) / 32768 }
        var difference = [Float](repeating: 0, count: maxLag + 1)
        var frames: [PitchFrame] = []
        signal.withUnsafeBufferPointer { x in
            difference.withUnsafeMutableBufferPointer { d in
                var start = 0
                while start + window + maxLag < x.count {
                    defer { start += step }
                    var energy: Float = 0
                    for j in start..<(start + window) { energy += x[j] * x[j] }
                    guard Double((energy / Float(window)).squareRoot()) >= minimumLevel else { continue }
                    for lag in 1...maxLag {
                        var sum: Float = 0
                        for j in start..<(start + window) {
                            let delta = x[j] - x[j + lag]
                            sum += delta * delta
                        }
                        d[lag] = sum
                    }
                    // Cumulative mean normalised difference: removes the bias towards short lags.
                    var running: Float = 0
                    d[0] = 1
                    for lag in 1...maxLag {
                        running += d[lag]
                        d[lag] = running > 0 ? d[lag] * Float(lag) / running : 1
                    }
                    var chosen: Int?
                    var lag = minLag
                    while lag < maxLag {
                        if Double(d[lag]) < threshold {
                            while lag + 1 < maxLag, d[lag + 1] < d[lag] { lag += 1 }
                            chosen = lag
                            break
                        }
                        lag += 1
                    }
                    guard let tau = chosen else { continue }
                    // Parabolic interpolation around the dip for sub-sample precision.
                    let a = d[tau - 1], b = d[tau], c = d[tau + 1]
                    let denominator = a - 2 * b + c
                    let offset = denominator != 0 ? 0.5 * (a - c) / denominator : 0
                    let period = Double(tau) + Double(max(-1, min(1, offset)))
                    frames.append(
                        PitchFrame(
                            time: (Double(start) + Double(window) / 2) / Double(sampleRate),
                            f0: Double(sampleRate) / period))
                }
            }
        }
        return frames
    }

    /// Median F0 of the voiced frames in Hz, or nil when nothing is voiced.
    public func medianF0(range: ClosedRange<Double> = 60...500) -> Double? {
        Self.median(pitchTrack(range: range).map(\.f0))
    }

    /// Median F0 of the voiced frames between two times, in seconds.
    public func medianF0(from start: Double, to end: Double, range: ClosedRange<Double> = 60...500) -> Double? {
        Self.median(pitchTrack(range: range).filter { $0.time >= start && $0.time < end }.map(\.f0))
    }

    /// The stretches of sound separated by at least `minimumSilence` seconds below `silenceLevel`.
    ///
    /// - Parameters:
    ///   - minimumSilence: the shortest quiet stretch that separates two segments, in seconds.
    ///   - silenceLevel: RMS (relative to full scale) of a 10 ms frame below which it counts as silent.
    ///   - minimumSound: segments shorter than this (clicks) are dropped, in seconds.
    public func soundingSegments(minimumSilence: Double = 0.2, silenceLevel: Double = 0.01, minimumSound: Double = 0.02)
        -> [Segment]
    {
        let frame = max(1, sampleRate / 100)
        let frameSeconds = Double(frame) / Double(sampleRate)
        var segments: [Segment] = []
        var soundStart: Int?
        var lastSound = 0
        var index = 0
        while index < samples.count {
            let end = min(samples.count, index + frame)
            if Self.rms(samples[index..<end]) >= silenceLevel {
                if let start = soundStart, index > lastSound,
                    Double(index - lastSound) / Double(sampleRate) >= minimumSilence
                {
                    segments.append(
                        Segment(start: Double(start) / Double(sampleRate), end: Double(lastSound) / Double(sampleRate)))
                    soundStart = index
                } else if soundStart == nil {
                    soundStart = index
                }
                lastSound = end
            }
            index = end
        }
        if let start = soundStart {
            segments.append(
                Segment(start: Double(start) / Double(sampleRate), end: Double(lastSound) / Double(sampleRate)))
        }
        return segments.filter { $0.duration >= max(minimumSound, frameSeconds) }
    }

    /// Seconds from the first to the last sounding frame (speech without leading and trailing silence).
    public func soundingDuration(silenceLevel: Double = 0.01) -> Double {
        let segments = soundingSegments(minimumSilence: 0.01, silenceLevel: silenceLevel, minimumSound: 0)
        guard let first = segments.first, let last = segments.last else { return 0 }
        return last.end - first.start
    }

    /// The longest stretch of silence between sounding frames, in seconds.
    public func longestInnerSilence(silenceLevel: Double = 0.01) -> Double {
        let segments = soundingSegments(minimumSilence: 0.01, silenceLevel: silenceLevel, minimumSound: 0)
        return zip(segments, segments.dropFirst()).map { $1.start - $0.end }.max() ?? 0
    }

    private static func rms(_ samples: ArraySlice<Int16>) -> Double {
        guard !samples.isEmpty else { return 0 }
        var sum = 0.0
        for sample in samples {
            let value = Double(sample) / 32768
            sum += value * value
        }
        return (sum / Double(samples.count)).squareRoot()
    }

    private static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
    }
}
