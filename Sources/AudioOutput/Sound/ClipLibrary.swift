import FoundationEssentials
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The recorded clips of a directory (`--clips DIR`), played in place of speech by a
/// `{"clip": "NAME"}` span.
///
/// The clip `NAME` is the file `NAME.wav`, `NAME.flac`, `NAME.ogg`, `NAME.oga` or `NAME.opus`
/// (the first of these that exists): any format libsndfile reads. Clips are looked up when an
/// announcement is accepted, so one added to the directory is playable at once, and decoded when
/// it is played, so the library costs no memory while the daemon is idle and a corrupt or
/// vanished file fails only the announcement that plays it. A clip's size and time of change are
/// part of its prepared form, so a render cache never serves the sound of a file since replaced.
public struct ClipLibrary: Sendable {
    /// The directory.
    public let directory: URL

    /// The extensions looked for, in order.
    public static let extensions = ["wav", "flac", "ogg", "oga", "opus"]
    /// The longest clip played, in seconds.
    public static let maximumDuration = 120.0
    /// The largest clip file read.
    public static let maximumFileBytes = 64 << 20

    /// One clip file as it was when it was looked up: what a prepared announcement carries.
    public struct File: Sendable, Hashable {
        /// The clip's name.
        public let name: String
        /// The file's path.
        public let path: String
        /// Its size in bytes and its time of change (nanoseconds): a file replaced since is another.
        public let bytes: Int
        public let modified: Int64
    }

    /// What a clip is, for `GET /v1/clips`.
    public struct Listing: Sendable, Hashable {
        public let name: String
        /// The file's name in the directory.
        public let file: String
        /// Its length in seconds, from the file's header.
        public let duration: Double
        public let sampleRate: Int
        public let channels: Int
        /// Its integrated loudness as recorded, in LUFS (libebur128, as the loudness target
        /// measures it); nil when it is too short (under 0.4 s) or too quiet to measure, or
        /// the clip check refuses the file.
        public var loudness: Double?
    }

    /// Each clip file's loudness, measured once: a file is known by its path, size and time of
    /// change, so a replaced one is measured again.
    private let loudnessCache = LoudnessCache()

    final class LoudnessCache: Sendable {
        private let measured = Mutex<[File: Double?]>([:])

        /// The loudness of `file`, measured by `measure` unless it was before.
        func loudness(of file: File, _ measure: () -> Double?) -> Double? {
            if let known = measured.withLock({ $0[file] }) { return known }
            let value = measure()
            measured.withLock { $0[file] = value }
            return value
        }

        /// Records the loudness of `file`, measured as it was stored.
        func record(_ value: Double?, for file: File) {
            measured.withLock { $0[file] = value }
        }

        /// Forgets every file but `files`: those replaced or removed since.
        func keep(only files: Set<File>) {
            measured.withLock { $0 = $0.filter { files.contains($0.key) } }
        }
    }

    /// Why a clip cannot be played or listed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// - Parameter directory: the clips directory; it must exist and be readable.
    public init(directory: URL) throws(Failure) {
        var status = stat()
        guard stat(directory.path, &status) == 0 else {
            throw Failure(
                description: "cannot read the clips directory \(directory.path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw Failure(description: "the clips directory \(directory.path) is not a directory")
        }
        self.directory = directory
    }

    /// The file of clip `name` now, or nil when the library has none; `name` must be a valid
    /// clip name (`Span.isValidClipName`), so it never leaves the directory.
    public func file(of name: String) -> File? {
        guard Span.isValidClipName(name) else { return nil }
        for ext in Self.extensions {
            let path = directory.appendingPathComponent("\(name).\(ext)").path
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, isInside(path) else { continue }
            return File(
                name: name, path: path, bytes: Int(status.st_size),
                modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
        }
        return nil
    }

    /// Whether `path`, its symbolic links followed, is a file of the directory itself: a clip
    /// is never read from elsewhere, so a link out of the directory is no clip (not listed, not
    /// played), while one to another clip of the directory is.
    func isInside(_ path: String) -> Bool {
        guard let file = realpath(path, nil) else { return false }
        defer { free(file) }
        guard let root = realpath(directory.path, nil) else { return false }
        defer { free(root) }
        let (filePath, rootPath) = (String(cString: file), String(cString: root))
        return PathText.directory(of: filePath) == rootPath
    }

    /// Every clip of the directory, by name; a file libsndfile cannot read is left out.
    public func list() throws(Failure) -> [Listing] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw Failure(description: "cannot read the clips directory \(directory.path): \(fileErrorReason(error))")
        }
        var listings: [String: Listing] = [:]
        var files: Set<File> = []
        for file in names {
            let url = directory.appendingPathComponent(file)
            let name = url.deletingPathExtension().lastPathComponent
            // Listed as `file(of:)` finds it: the first of its extensions.
            guard Self.extensions.contains(url.pathExtension), let found = self.file(of: name), found.path == url.path
            else { continue }
            guard let header = RecordedSound.header(of: found.path) else { continue }
            files.insert(found)
            // Decoded once per file: the first listing after a clip is added measures it.
            let loudness = loudnessCache.loudness(of: found) {
                (try? Self.check(found.path, sampleRate: header.sampleRate))?.loudness
            }
            listings[name] = Listing(
                name: name, file: file, duration: Double(header.frames) / Double(header.sampleRate),
                sampleRate: header.sampleRate, channels: header.channels, loudness: loudness)
        }
        loudnessCache.keep(only: files)
        return listings.keys.sorted().map { listings[$0]! }
    }

    /// Records the loudness of a clip just stored, measured from the sound its check decoded.
    func recordLoudness(_ loudness: Double?, of name: String) {
        guard let file = file(of: name) else { return }
        loudnessCache.record(loudness, for: file)
    }

    /// The samples of `file`, decoded now, in `format`, at `loudness` LUFS (nil: as recorded);
    /// one too short or too quiet to measure is played as recorded.
    public func samples(of file: File, format: AudioFormat, loudness: Double?) throws(Failure) -> [Int16] {
        // A vanished file is told as gone by the check below.
        var status = stat()
        if stat(file.path, &status) == 0, !isInside(file.path) {
            throw Failure(
                description:
                    "clip '\(file.name)': \(file.path) leads out of the clip directory (a symbolic link): it is not played"
            )
        }
        let sound: RecordedSound
        do {
            sound = try Self.check(file.path, sampleRate: format.sampleRate)
        } catch {
            throw Failure(description: "clip '\(file.name)': \(file.path): \(error.reason)")
        }
        let gain = loudness.flatMap { target in sound.loudness.map { loudnessGain(from: $0, to: target) } } ?? 1
        return sound.samples(gain: gain, format: format)
    }

    /// The one check of a clip, a file of the directory or an upload alike: at most
    /// `maximumFileBytes`, a format libsndfile reads, at most `maximumDuration` long, every sample
    /// finite. Its sound, decoded at `sampleRate`; the failure's reason does not name the path.
    static func check(_ path: String, sampleRate: Int) throws(RecordedSound.Failure) -> RecordedSound {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw RecordedSound.Failure(reason: "it is gone: \(String(cString: strerror(errno)))")
        }
        guard Int(status.st_size) <= Self.maximumFileBytes else {
            throw RecordedSound.Failure(
                reason:
                    "it is \(Int(status.st_size) >> 20) MiB, over the \(Self.maximumFileBytes >> 20) MiB a clip may be")
        }
        return try RecordedSound(decoding: path, sampleRate: sampleRate, maximumDuration: Self.maximumDuration)
    }
}
