import CEbur128
import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

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

    /// Applies the gain to `chunk`'s samples and limits their peaks, in place; a chunk already
    /// at the output's loudness (`isLevelled`, a clip) is left as it is.
    public mutating func process(_ chunk: inout PCMChunk) {
        guard !chunk.isLevelled else { return }
        process(&chunk.samples)
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

/// The gain that brings an engine's speech to a target loudness, found once per voice, pitch and
/// rate by rendering a reference sentence and measuring it with libebur128, then cached.
///
/// Measuring each announcement itself would mean holding it back until all of it is rendered;
/// a voice's loudness hardly depends on the words, so a gain calibrated on a reference is applied
/// as the speech streams. `volume` is left to the engine and scales the result, so an
/// announcement asked at volume 0.5 is 6 dB under the target; the limiter keeps volume above
/// 1.0 from clipping.
public actor LoudnessCalibration {
    /// The target integrated loudness, in LUFS.
    public let target: Double
    private let renderer: any SpeechRenderer
    private let logger: Logger
    private var gains: [Key: Double] = [:]

    /// Spoken to calibrate: three typical announcements, about ten seconds, in whatever voice is
    /// being calibrated (its letter-to-sound rules read it in that language's way). One sentence
    /// was not enough for Piper: the limiter takes back what a voice's peaks pass the ceiling by,
    /// and that differs from sentence to sentence (the old one-sentence reference, peakier than
    /// most, left other announcements 0.2-0.6 LU over the target).
    static let reference =
        "The next train to the city centre leaves from platform four in five minutes. Please mind the gap. "
        + "Visitors with tickets for the exhibition may enter through the north door. "
        + "Thank you for waiting; your number will be called shortly."

    private struct Key: Hashable {
        var voice: String
        var pitch: Double?
        var rate: Double?
        var language: LanguageTag?
    }

    /// - Parameters:
    ///   - target: the target loudness in LUFS.
    ///   - renderer: the engine whose speech is calibrated.
    ///   - logger: where a calibration that failed is reported (that voice then plays at gain 1).
    public init(target: Double, renderer: any SpeechRenderer, logger: Logger = Logger(label: "speakd.loudness")) {
        self.target = target
        self.renderer = renderer
        self.logger = logger
    }

    /// The gain for `speech`: measured the first time its voice, pitch and rate are heard.
    public func gain(for speech: PreparedUtterance) async -> Double {
        let attributes = speech.utterance.firstSpokenSpan?.attributes ?? SpeechAttributes()
        let key = Key(
            voice: speech.voice ?? "", pitch: attributes.pitch, rate: attributes.rate, language: attributes.language)
        if let gain = gains[key] { return gain }
        let gain = await measure(attributes)
        gains[key] = gain
        return gain
    }

    /// Calibrates the default voice at start-up, so the first announcement does not wait for it.
    public func warmUp() async {
        if let prepared = try? await renderer.prepare(Utterance(Self.reference)) {
            _ = await gain(for: prepared)
        }
    }

    private func measure(_ attributes: SpeechAttributes) async -> Double {
        var reference = SpeechAttributes()
        // The voice by name too: a Piper voice is measured as itself, not as espeak-ng's voice
        // for its language (which read 6 LU louder than joe-medium).
        reference.voice = attributes.voice
        reference.language = attributes.language
        reference.pitch = attributes.pitch
        reference.rate = attributes.rate
        let measured: Double?
        var samples: [Int16] = []
        do {
            let prepared = try await renderer.prepare(Utterance(Self.reference, defaults: reference))
            for try await chunk in renderer.render(prepared, chunking: .whole) { samples += chunk.samples }
            measured = LoudnessMeter.loudness(of: samples, format: renderer.format)
        } catch {
            logger.warning(
                "loudness calibration failed; this voice plays at gain 1",
                metadata: ["language": "\(attributes.language.map { "\($0)" } ?? "default")", "error": "\(error)"])
            return 1
        }
        guard let measured else {
            logger.warning(
                "loudness calibration measured no loudness; this voice plays at gain 1",
                metadata: ["language": "\(attributes.language.map { "\($0)" } ?? "default")"])
            return 1
        }
        return throughLimiter(loudnessGain(from: measured, to: target), samples)
    }

    /// `gain` raised until `samples` played through the `PeakLimiter` at it measure the target:
    /// the limiter takes back part of the gain wherever peaks pass its ceiling (a Piper voice's
    /// peaks stand 16–25 dB over its loudness, and it played 1–2.3 LU under the target). Each
    /// round brings it closer (within 0.1 LU after three for joe-medium); the gain is raised by
    /// at most 6 dB, so a voice that is nearly all peaks is not crushed to reach it.
    private func throughLimiter(_ gain: Double, _ samples: [Int16]) -> Double {
        let format = renderer.format
        var raised = gain
        for _ in 0..<4 {
            var limiter = PeakLimiter(gain: raised, sampleRate: format.sampleRate)
            var limited = samples
            limiter.process(&limited)
            guard let heard = LoudnessMeter.loudness(of: limited, format: format), abs(heard - target) > 0.05 else {
                break
            }
            raised = min(gain * 2, raised * loudnessGain(from: heard, to: target))
        }
        return raised
    }
}

extension LoudnessCalibration {
    /// The linear gain `speech` is played at, or nil for none: the calibration's (nil for none)
    /// times what its `volume` asks above 1.0, which the engine cannot render (it saturates
    /// there), so it is gain under the limiter instead.
    public static func playbackGain(for speech: PreparedUtterance, calibration: LoudnessCalibration?) async
        -> Double?
    {
        let boost = max(1, speech.utterance.firstSpokenSpan?.attributes.volume ?? 1)
        let loudnessGain = await calibration?.gain(for: speech)
        return loudnessGain == nil && boost == 1 ? nil : (loudnessGain ?? 1) * boost
    }
}

/// Speech with a gain under a `PeakLimiter`, chunk by chunk as it streams: how the daemon and
/// in-process `speak` bring speech to the configured loudness.
public struct LimitedSpeech<Speech: AsyncSequence & Sendable>: AsyncSequence, Sendable
where Speech.Element == PCMChunk {
    public typealias Element = PCMChunk
    let speech: Speech
    let limiter: PeakLimiter?

    /// - Parameters:
    ///   - speech: the engine's chunks.
    ///   - limiter: the gain and limiter; nil passes the chunks as they are.
    public init(_ speech: Speech, limiter: PeakLimiter?) {
        self.speech = speech
        self.limiter = limiter
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var speech: Speech.AsyncIterator
        var limiter: PeakLimiter?

        public mutating func next() async throws -> PCMChunk? {
            guard var chunk = try await speech.next() else { return nil }
            limiter?.process(&chunk)
            return chunk
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(speech: speech.makeAsyncIterator(), limiter: limiter)
    }
}

extension Utterance {
    /// The first span that is speech, not a recorded clip, with the defaults applied: its voice,
    /// pitch, rate and volume are the speech's, which the loudness gain is calibrated for (a clip
    /// is brought to the target by itself).
    fileprivate var firstSpokenSpan: Span? {
        resolvedSpans.first { $0.clip == nil }
    }
}
