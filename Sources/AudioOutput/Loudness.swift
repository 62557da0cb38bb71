import CEbur128
import Foundation
import SpeechRendering

/// Integrated loudness (EBU R128 / ITU-R BS.1770, in LUFS) and true peak of 16-bit PCM,
/// measured by libebur128.
public final class LoudnessMeter {
    private let state: UnsafeMutablePointer<ebur128_state>
    private let channels: Int

    /// What is wrong when libebur128 cannot measure.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// - Parameters:
    ///   - format: the format of every sample added.
    ///   - truePeak: whether to measure the true peak too (4× oversampling: it costs more than
    ///     the loudness itself).
    public init(format: AudioFormat, truePeak: Bool = false) throws(Failure) {
        let mode = Int32(EBUR128_MODE_I.rawValue | (truePeak ? EBUR128_MODE_TRUE_PEAK.rawValue : 0))
        guard let state = ebur128_init(UInt32(format.channels), UInt(format.sampleRate), mode) else {
            throw Failure(description: "libebur128 cannot measure \(format)")
        }
        self.state = state
        self.channels = format.channels
    }

    deinit {
        var state: UnsafeMutablePointer<ebur128_state>? = state
        ebur128_destroy(&state)
    }

    /// Adds interleaved samples.
    public func add(_ samples: [Int16]) {
        guard samples.count >= channels else { return }
        samples.withUnsafeBufferPointer { buffer in
            _ = ebur128_add_frames_short(state, buffer.baseAddress, buffer.count / channels)
        }
    }

    /// The integrated loudness of everything added, in LUFS; nil for silence or less than one
    /// 400 ms block.
    public var integratedLoudness: Double? {
        var loudness = 0.0
        guard ebur128_loudness_global(state, &loudness) == EBUR128_SUCCESS.rawValue, loudness.isFinite else {
            return nil
        }
        return loudness
    }

    /// The highest true peak of any channel, as a linear factor of full scale (1 = 0 dBTP);
    /// 0 unless made with `truePeak`.
    public var truePeak: Double {
        var highest = 0.0
        for channel in 0..<channels {
            var peak = 0.0
            if ebur128_true_peak(state, UInt32(channel), &peak) == EBUR128_SUCCESS.rawValue {
                highest = max(highest, peak)
            }
        }
        return highest
    }

    /// The integrated loudness of `samples` in `format`; nil when too short or silent.
    public static func loudness(of samples: [Int16], format: AudioFormat) -> Double? {
        guard let meter = try? LoudnessMeter(format: format) else { return nil }
        meter.add(samples)
        return meter.integratedLoudness
    }
}

/// Applies a gain to a stream of samples and keeps every sample below a ceiling.
///
/// The gain is known before the stream starts (`LoudnessCalibration`), so the stream is never held
/// back to be measured. What the gain (and a `volume` up to 2.0, +6 dB) pushes over the ceiling is
/// limited with an instant attack and a smooth release. It is written here rather than taken from a
/// library because it must run chunk by chunk inside the playback stream with no look-ahead
/// (look-ahead would delay the first sample) and no allocation; libebur128 measures but does not
/// process. The ceiling sits 1 dB below full scale so the peaks between samples (true peak, which
/// a sample-peak limiter cannot see) stay under 0 dBTP too.
public struct PeakLimiter: Sendable {
    /// The linear gain applied before limiting.
    public var gain: Float
    /// The highest absolute sample value let out, as a factor of full scale.
    public let ceiling: Float
    /// Per-sample factor by which a gain reduction recovers (about 50 ms to return within 1 dB).
    private let release: Float
    /// The gain reduction now, 1 for none.
    private var reduction: Float = 1

    /// - Parameters:
    ///   - gain: linear gain, e.g. from `LoudnessCalibration`.
    ///   - ceiling: highest sample value let out, as a factor of full scale (-1 dBFS by default).
    ///   - sampleRate: the stream's rate, for the release time.
    public init(gain: Double, ceiling: Double = 0.891, sampleRate: Int) {
        self.gain = Float(gain)
        self.ceiling = Float(ceiling)
        self.release = Float(exp(-1.0 / (0.025 * Double(max(sampleRate, 1)))))
    }

    /// Applies the gain to `samples` and limits their peaks, in place.
    public mutating func process(_ samples: inout [Int16]) {
        guard gain != 1 || reduction < 1 else { return }
        let limit = ceiling * 32767
        let gain = gain
        let release = release
        var reduction = reduction
        // Float and no bounds checks: this runs on every sample the daemon plays, and its cost
        // is measured against rendering (speakd-engine-bench --loudness).
        samples.withUnsafeMutableBufferPointer { buffer in
            for index in buffer.indices {
                let value = Float(buffer[index]) * gain
                var magnitude = abs(value)
                if reduction < 1 {
                    // Recover towards no reduction.
                    reduction = 1 - (1 - reduction) * release
                    magnitude *= reduction
                }
                // Reduce at once if this sample would pass the limit.
                if magnitude > limit { reduction = limit / abs(value) }
                let limited = value * reduction
                buffer[index] = Int16(limited + (limited < 0 ? -0.5 : 0.5))
            }
        }
        self.reduction = reduction
    }
}

/// A loudness in LUFS as a linear gain that brings `measured` to `target`.
public func loudnessGain(from measured: Double, to target: Double) -> Double {
    pow(10, (target - measured) / 20)
}
