import CSndfile
import FoundationEssentials
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

extension ClipLibrary {
    /// Why an upload is not stored.
    public struct UploadFailure: Error, Sendable, CustomStringConvertible {
        /// What kind of refusal it is.
        public enum Kind: Sendable, Hashable {
            /// The name is not a clip name.
            case name
            /// A clip of that name exists and the upload did not ask to replace it.
            case exists
            /// The sound is refused by the clip check (format, length, size, NaN or infinite samples).
            case sound
            /// The directory cannot be written.
            case directory
        }
        public let kind: Kind
        /// A sentence for a person, without the temporary file's path.
        public let description: String
    }

    /// What an upload became.
    public struct Stored: Sendable, Hashable {
        /// The clip as `list()` shows it now.
        public let listing: Listing
        /// Whether a clip of that name was there before and is replaced.
        public let replaced: Bool
    }

    /// Stores `data` as clip `name` after the check every clip of the directory gets
    /// (`check(_:sampleRate:)`): written to a new temporary file of the directory (`O_EXCL`,
    /// `O_NOFOLLOW`, mode 0640; one a crash leaves behind goes at the next start:
    /// `removeLeftoverUploads()`), synced, checked, then renamed into place as `NAME.wav`,
    /// `NAME.flac`, `NAME.ogg` or `NAME.opus` after its format, and the directory synced. A clip
    /// of that name (in any of its extensions) is replaced only when `replace` says so; a
    /// symbolic link in its place is replaced, never followed.
    public func store(_ data: Data, as name: String, replace: Bool) throws(UploadFailure) -> Stored {
        guard Span.isValidClipName(name) else {
            throw UploadFailure(
                kind: .name,
                description:
                    "'\(name)' is not a clip name (1 to 128 letters, digits, '.', '-', '_', starting with a letter or digit)"
            )
        }
        let existing = Self.extensions.filter { ext in
            var status = stat()
            return lstat(directory.appendingPathComponent("\(name).\(ext)").path, &status) == 0
        }
        guard replace || existing.isEmpty else { throw Self.exists(name) }
        let temporary = directory.appendingPathComponent(".upload-\(UUID().uuidString).part").path
        try write(data, to: temporary)
        var placed = false
        defer { if !placed { unlink(temporary) } }
        let sound: (frames: Int, sampleRate: Int, channels: Int, format: Int32)
        let loudness: Double?
        do throws(RecordedSound.Failure) {
            guard let header = RecordedSound.header(of: temporary) else {
                var info = SF_INFO()
                guard let file = sf_open(temporary, Int32(SFM_READ), &info) else {
                    throw RecordedSound.Failure(
                        reason: "libsndfile cannot read it: \(String(cString: sf_strerror(nil)))")
                }
                sf_close(file)
                throw RecordedSound.Failure(reason: "no audio in it")
            }
            // The one check, as a clip of the directory gets when it is played.
            loudness = try Self.check(temporary, sampleRate: header.sampleRate).loudness
            sound = header
        } catch {
            throw UploadFailure(kind: .sound, description: "the clip '\(name)' is refused: \(error.reason)")
        }
        guard let ext = Self.fileExtension(format: sound.format) else {
            throw UploadFailure(
                kind: .sound,
                description:
                    "the clip '\(name)' is refused: it is not a WAV, FLAC, Ogg Vorbis or Opus file, the formats a clip may be"
            )
        }
        let final = directory.appendingPathComponent("\(name).\(ext)").path
        if replace {
            guard rename(temporary, final) == 0 else { throw directoryFailure("cannot rename it into place") }
            // The same name in another extension would still be found first: it goes.
            for other in existing where other != ext {
                unlink(directory.appendingPathComponent("\(name).\(other)").path)
            }
        } else {
            // link(2) never replaces: a clip stored meanwhile under this name is a conflict.
            guard link(temporary, final) == 0 else {
                if errno == EEXIST { throw Self.exists(name) }
                throw directoryFailure("cannot link it into place")
            }
            unlink(temporary)
        }
        placed = true
        syncDirectory()
        recordLoudness(loudness, of: name)
        let listing = Listing(
            name: name, file: "\(name).\(ext)", duration: Double(sound.frames) / Double(sound.sampleRate),
            sampleRate: sound.sampleRate, channels: sound.channels, loudness: loudness)
        return Stored(listing: listing, replaced: !existing.isEmpty)
    }

    /// Removes the temporary files of uploads that a crash or a `kill -9` left in the directory
    /// (`.upload-*.part`, regular files only; a link of that name is removed, never followed).
    /// Runs at start, before any upload is taken: no upload is in flight then.
    /// - Returns: the names removed.
    @discardableResult
    public func removeLeftoverUploads() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { name in
            guard name.hasPrefix(".upload-"), name.hasSuffix(".part") else { return false }
            let path = directory.appendingPathComponent(name).path
            var status = stat()
            guard lstat(path, &status) == 0,
                status.st_mode & S_IFMT == S_IFREG || status.st_mode & S_IFMT == S_IFLNK
            else { return false }
            return unlink(path) == 0
        }.sorted()
    }

    /// The decoded sound of clip `name` as recorded (no loudness change), in `format`; nil when
    /// the library has no clip of that name.
    public func sound(of name: String, format: AudioFormat) throws(Failure) -> [Int16]? {
        guard let file = file(of: name) else { return nil }
        return try samples(of: file, format: format, loudness: nil)
    }

    /// The extension a clip of libsndfile's `format` is stored under; nil for a format no clip is.
    static func fileExtension(format: Int32) -> String? {
        switch format & Int32(SF_FORMAT_TYPEMASK) {
        case Int32(SF_FORMAT_WAV), Int32(SF_FORMAT_WAVEX), Int32(SF_FORMAT_RF64): "wav"
        case Int32(SF_FORMAT_FLAC): "flac"
        case Int32(SF_FORMAT_OGG): format & Int32(SF_FORMAT_SUBMASK) == Int32(SF_FORMAT_OPUS) ? "opus" : "ogg"
        default: nil
        }
    }

    private static func exists(_ name: String) -> UploadFailure {
        UploadFailure(
            kind: .exists, description: "a clip named '\(name)' exists; upload with ?replace=true to replace it")
    }

    private func directoryFailure(_ what: String) -> UploadFailure {
        UploadFailure(
            kind: .directory,
            description: "the clip directory \(directory.path): \(what): \(String(cString: strerror(errno)))")
    }

    /// Writes `data` to the new file `path`, which must not exist (no link is followed), mode
    /// 0640, and syncs it.
    private func write(_ data: Data, to path: String) throws(UploadFailure) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw directoryFailure("cannot create a file there") }
        var failed: String?
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failed = "cannot write the upload"
                    return
                }
                offset += written
            }
        }
        // The mode is 0640 whatever the umask.
        if failed == nil, fchmod(descriptor, 0o640) != 0 { failed = "cannot set the upload's mode" }
        if failed == nil, fsync(descriptor) != 0 { failed = "cannot sync the upload" }
        let error = directoryFailure(failed ?? "")
        close(descriptor)
        if failed != nil {
            unlink(path)
            throw error
        }
    }

    /// Syncs the directory, so the rename survives a power cut.
    private func syncDirectory() {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }
}
