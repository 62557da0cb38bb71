import AnnouncementQueue
import AudioOutput
import Foundation
import Logging
import SpeakAPI
import SpeechModel
import SpeechRendering
import Synchronization

/// What is played around and to the speech of an announcement: its chime and its loudness.
public struct AnnouncementSound: Sendable {
    /// The chimes, converted and normalised at start-up.
    public let chimes: ChimeLibrary
    /// The chime each priority plays when a request names none; a missing key plays none.
    public let defaultChimes: [AnnouncementPriority: String]
    /// The chime each priority plays after the speech when a request names none.
    public let defaultChimesAfter: [AnnouncementPriority: String]
    /// Brings speech to the target loudness; nil leaves it as the engine renders it.
    public let loudness: LoudnessCalibration?

    /// - Parameters:
    ///   - chimes: the chimes.
    ///   - defaultChimes: each priority's chime, every name one of `chimes`.
    ///   - defaultChimesAfter: each priority's chime after the speech, every name one of `chimes`.
    ///   - loudness: the speech loudness calibration; nil for `--loudness off`.
    public init(
        chimes: ChimeLibrary, defaultChimes: [AnnouncementPriority: String] = [:],
        defaultChimesAfter: [AnnouncementPriority: String] = [:], loudness: LoudnessCalibration? = nil
    ) {
        self.chimes = chimes
        self.defaultChimes = defaultChimes
        self.defaultChimesAfter = defaultChimesAfter
        self.loudness = loudness
    }

    /// No chimes and the engine's own loudness: the speaker as it was before either existed.
    public static func plain(format: AudioFormat) -> AnnouncementSound {
        AnnouncementSound(chimes: ChimeLibrary(format: format))
    }

    /// The samples of the chime `announcement` plays, or nil for none.
    func chime(for announcement: Announcement) -> [Int16]? {
        samples(of: announcement.chime, byPriority: defaultChimes, announcement.priority)
    }

    /// The samples of the chime `announcement` plays after its speech, or nil for none.
    func chimeAfter(for announcement: Announcement) -> [Int16]? {
        samples(of: announcement.chimeAfter, byPriority: defaultChimesAfter, announcement.priority)
    }

    private func samples(
        of choice: ChimeChoice, byPriority defaults: [AnnouncementPriority: String], _ priority: AnnouncementPriority
    ) -> [Int16]? {
        switch choice {
        case .none: return nil
        case .named(let name): return chimes.chimes[name]
        case .priorityDefault: return defaults[priority].flatMap { chimes.chimes[$0] }
        }
    }
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

    /// Spoken to calibrate: a typical announcement of about four seconds, in whatever voice is
    /// being calibrated (its letter-to-sound rules read it in that language's way).
    static let reference =
        "The next train to the city centre leaves from platform four in five minutes. Please mind the gap."

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
        let attributes = speech.utterance.resolvedSpans.first?.attributes ?? SpeechAttributes()
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
        reference.language = attributes.language
        reference.pitch = attributes.pitch
        reference.rate = attributes.rate
        let measured: Double?
        do {
            let prepared = try await renderer.prepare(Utterance(Self.reference, defaults: reference))
            let meter = try LoudnessMeter(format: renderer.format)
            for try await chunk in renderer.render(prepared, chunking: .whole) { meter.add(chunk.samples) }
            measured = meter.integratedLoudness
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
        return loudnessGain(from: measured, to: target)
    }
}
