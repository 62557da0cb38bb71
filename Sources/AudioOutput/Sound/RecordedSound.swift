import CSamplerate
import CSndfile
import FoundationEssentials
import PosixSupport
import SpeechRendering

/// A recorded sound (a chime, a clip) decoded with libsndfile, mixed to mono, resampled with
/// libsamplerate to the engine's rate and brought to a loudness with libebur128: what chimes and
/// clips share.
///
/// A float file may hold any value: one that is not a number (NaN) or infinite is refused with
/// the sample's place, since no sound can be made of it; one past full scale (above 1.0) is
/// clamped to full scale, as a sound card would.
struct RecordedSound {
    /// The samples, mono, full scale ±1, at `sampleRate`.
    var mono: [Float]
    let sampleRate: Int

    /// Why a file cannot be used; `reason` does not repeat the file's path.
    struct Failure: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    /// Decodes every format libsndfile reads (WAV, FLAC, Ogg…).
    /// - Parameters:
    ///   - path: the file.
    ///   - sampleRate: the rate it is resampled to.
    ///   - maximumDuration: the longest sound accepted, in seconds.
    init(decoding path: String, sampleRate: Int, maximumDuration: Double) throws(Failure) {
        var info = SF_INFO()
        guard let file = sf_open(path, Int32(SFM_READ), &info) else {
            throw Failure(reason: String(cString: sf_strerror(nil)))
        }
        defer { sf_close(file) }
        let channels = Int(info.channels)
        let frames = Int(info.frames)
        guard channels > 0, info.samplerate > 0, frames > 0 else { throw Failure(reason: "no audio in it") }
        let seconds = Double(frames) / Double(info.samplerate)
        guard seconds <= maximumDuration else {
            throw Failure(
                reason: "\(cFormat("%.1f", seconds)) s long; the most is \(cFormat("%g", maximumDuration)) s")
        }
        var interleaved = [Float](repeating: 0, count: frames * channels)
        let read = interleaved.withUnsafeMutableBufferPointer {
            sf_readf_float(file, $0.baseAddress, sf_count_t(frames))
        }
        guard read > 0 else { throw Failure(reason: "cannot decode it: \(String(cString: sf_strerror(file)))") }
        try Self.clampToFullScale(&interleaved, count: Int(read) * channels, channels: channels, rate: info.samplerate)
        // Mixed down to mono, then spread to the engine's channels (espeak-ng renders mono).
        var mono = [Float](repeating: 0, count: Int(read))
        for frame in 0..<Int(read) {
            var sum: Float = 0
            for channel in 0..<channels { sum += interleaved[frame * channels + channel] }
            mono[frame] = sum / Float(channels)
        }
        if Int(info.samplerate) != sampleRate {
            mono = try Self.resample(mono, from: Int(info.samplerate), to: sampleRate)
        }
        self.mono = mono
        self.sampleRate = sampleRate
    }

    /// Refuses a sample that is NaN or infinite, naming the first, and clamps the others to ±1.
    static func clampToFullScale(_ samples: inout [Float], count: Int, channels: Int, rate: Int32) throws(Failure) {
        for index in 0..<count {
            let value = samples[index]
            guard value.isFinite else {
                let frame = index / channels
                throw Failure(
                    reason:
                        "sample \(frame) (at \(cFormat("%.3f", Double(frame) / Double(rate))) s) is "
                        + (value.isNaN ? "not a number (NaN)" : "infinite")
                        + ": a sound must hold finite samples")
            }
            if value > 1 {
                samples[index] = 1
            } else if value < -1 {
                samples[index] = -1
            }
        }
    }

    /// What a file's header says, without decoding it; nil when libsndfile cannot read it.
    /// `format` is libsndfile's (`SF_FORMAT_WAV | SF_FORMAT_PCM_16`).
    static func header(of path: String) -> (frames: Int, sampleRate: Int, channels: Int, format: Int32)? {
        var info = SF_INFO()
        guard let file = sf_open(path, Int32(SFM_READ), &info) else { return nil }
        sf_close(file)
        guard info.channels > 0, info.samplerate > 0 else { return nil }
        return (Int(info.frames), Int(info.samplerate), Int(info.channels), info.format)
    }

    /// Its integrated loudness in LUFS, or nil when it is too short or too quiet to measure
    /// (libebur128 needs 0.4 s of sound).
    var loudness: Double? {
        let samples = mono.map { Self.int16($0 * 32767) }
        return LoudnessMeter.loudness(of: samples, format: AudioFormat(sampleRate: sampleRate))
    }

    /// The samples at `gain`, scaled down as a whole if their peak would pass -1 dBFS (a
    /// recording is known in advance, so it needs no limiter), in `format`'s channels.
    func samples(gain: Double, format: AudioFormat) -> [Int16] {
        var gain = Float(gain)
        let peak = mono.reduce(0) { max($0, abs($1)) } * gain
        if peak > 0.891 { gain *= 0.891 / peak }
        var output = [Int16]()
        output.reserveCapacity(mono.count * format.channels)
        for sample in mono {
            let value = Self.int16(sample * gain * 32767)
            for _ in 0..<format.channels { output.append(value) }
        }
        return output
    }

    /// `value` rounded to the nearest 16-bit sample, clamped to ±32767; 0 for a value that is not
    /// finite, so no conversion can trap whatever a resampler or a gain made of it.
    static func int16(_ value: Float) -> Int16 {
        guard value.isFinite else { return 0 }
        return Int16(max(-32767, min(32767, value.rounded())))
    }

    private static func resample(_ samples: [Float], from rate: Int, to target: Int) throws(Failure) -> [Float] {
        let ratio = Double(target) / Double(rate)
        var output = [Float](repeating: 0, count: Int(Double(samples.count) * ratio) + 64)
        var data = SRC_DATA()
        let status = samples.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                data.data_in = input.baseAddress
                data.input_frames = samples.count
                data.data_out = out.baseAddress
                data.output_frames = out.count
                data.src_ratio = ratio
                return src_simple(&data, Int32(SRC_SINC_BEST_QUALITY), 1)
            }
        }
        guard status == 0 else {
            throw Failure(reason: "cannot resample it: \(String(cString: src_strerror(status)))")
        }
        return Array(output.prefix(Int(data.output_frames_gen)))
    }
}
