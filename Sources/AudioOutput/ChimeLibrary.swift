import CSamplerate
import CSndfile
import FoundationEssentials
import PosixSupport
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// The chimes (earcons) of a directory, decoded, mixed to the engine's channels, resampled to
/// its rate and brought to the announcements' loudness, all once at start-up.
///
/// Every sound file of the directory whose format libsndfile reads (WAV, FLAC, Ogg…) is a
/// chime named by its file name without extension: `ding.wav` is `ding`.
public struct ChimeLibrary: Sendable {
    /// The samples of each chime, in `format`.
    public let chimes: [String: [Int16]]
    /// The format they were converted to.
    public let format: AudioFormat

    /// What is wrong with the directory or one of its chimes.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The longest chime accepted: it delays the speech by that much.
    public static let maximumDuration = 10.0

    /// An empty library.
    public init(format: AudioFormat) {
        self.chimes = [:]
        self.format = format
    }

    /// Loads every chime of `directory`.
    /// - Parameters:
    ///   - directory: the chimes directory.
    ///   - format: the engine's format, which the chimes are converted to.
    ///   - loudness: the target loudness in LUFS each chime is brought to; nil leaves them as they are.
    public init(directory: URL, format: AudioFormat, loudness: Double?) throws(Failure) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        } catch {
            throw Failure(
                description: "cannot read the chimes directory \(directory.path): \(fileErrorReason(error))")
        }
        var chimes: [String: [Int16]] = [:]
        for file in names where !file.hasPrefix(".") && !file.hasSuffix(".md") {
            let url = directory.appendingPathComponent(file)
            let name = url.deletingPathExtension().lastPathComponent
            guard chimes[name] == nil else {
                throw Failure(description: "two chimes are called '\(name)' in \(directory.path)")
            }
            chimes[name] = try Self.load(url, format: format, loudness: loudness)
        }
        self.chimes = chimes
        self.format = format
    }

    /// The chime names, sorted.
    public var names: [String] { chimes.keys.sorted() }

    /// Decodes, mixes, resamples and normalises one file.
    static func load(_ url: URL, format: AudioFormat, loudness: Double?) throws(Failure) -> [Int16] {
        var info = SF_INFO()
        guard let file = sf_open(url.path, Int32(SFM_READ), &info) else {
            throw Failure(description: "chime \(url.path): \(String(cString: sf_strerror(nil)))")
        }
        defer { sf_close(file) }
        let channels = Int(info.channels)
        let frames = Int(info.frames)
        guard channels > 0, info.samplerate > 0, frames > 0 else {
            throw Failure(description: "chime \(url.path): no audio in it")
        }
        let seconds = Double(frames) / Double(info.samplerate)
        guard seconds <= maximumDuration else {
            throw Failure(
                description:
                    "chime \(url.path): \(cFormat("%.1f", seconds)) s long; the most is \(Int(maximumDuration)) s"
            )
        }
        var interleaved = [Float](repeating: 0, count: frames * channels)
        let read = interleaved.withUnsafeMutableBufferPointer {
            sf_readf_float(file, $0.baseAddress, sf_count_t(frames))
        }
        guard read > 0 else {
            throw Failure(description: "chime \(url.path): cannot decode it")
        }
        // Mixed down to mono, then spread to the engine's channels (espeak-ng renders mono).
        var mono = [Float](repeating: 0, count: Int(read))
        for frame in 0..<Int(read) {
            var sum: Float = 0
            for channel in 0..<channels { sum += interleaved[frame * channels + channel] }
            mono[frame] = sum / Float(channels)
        }
        if Int(info.samplerate) != format.sampleRate {
            mono = try resample(mono, from: Int(info.samplerate), to: format.sampleRate, url: url)
        }
        var gain: Float = 1
        if let loudness {
            let samples = mono.map { Int16(max(-32767, min(32767, ($0 * 32767).rounded()))) }
            guard let measured = LoudnessMeter.loudness(of: samples, format: AudioFormat(sampleRate: format.sampleRate))
            else {
                throw Failure(
                    description:
                        "chime \(url.path): too short or too quiet to measure its loudness (at least 0.4 s of sound)")
            }
            gain = Float(loudnessGain(from: measured, to: loudness))
        }
        // A chime is short and known in advance: scaled down as a whole if its peak would clip.
        let peak = mono.reduce(0) { max($0, abs($1)) } * gain
        if peak > 0.891 { gain *= 0.891 / peak }
        var output = [Int16]()
        output.reserveCapacity(mono.count * format.channels)
        for sample in mono {
            let value = Int16((sample * gain * 32767).rounded())
            for _ in 0..<format.channels { output.append(value) }
        }
        return output
    }

    private static func resample(_ samples: [Float], from rate: Int, to target: Int, url: URL) throws(Failure)
        -> [Float]
    {
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
            throw Failure(
                description: "chime \(url.path): cannot resample it: \(String(cString: src_strerror(status)))")
        }
        return Array(output.prefix(Int(data.output_frames_gen)))
    }
}
