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
        // Errors name the chime as a request does, and its file.
        let chime = "chime '\(url.deletingPathExtension().lastPathComponent)' (\(url.path))"
        let sound: RecordedSound
        do {
            sound = try RecordedSound(
                decoding: url.path, sampleRate: format.sampleRate, maximumDuration: maximumDuration)
        } catch {
            throw Failure(description: "\(chime): \(error.reason)")
        }
        var gain = 1.0
        if let loudness {
            guard let measured = sound.loudness else {
                throw Failure(
                    description: "\(chime): too short or too quiet to measure its loudness (at least 0.4 s of sound)")
            }
            gain = loudnessGain(from: measured, to: loudness)
        }
        return sound.samples(gain: gain, format: format)
    }
}
