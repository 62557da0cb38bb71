import Logging
import PosixSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The render cache's tier on disk: renders kept as files in a directory of their own, bounded in
/// bytes, the least recently used going first, found again after a restart.
///
/// A file is named after a hash of its key (`RenderKeyHash`) and holds the key itself
/// (`RenderCacheFile`). It is written aside and renamed into place, so no reader sees half of
/// one; it is not synced, because a file torn by a power cut fails its checksum and is removed
/// like any damaged one. Which file was used last is kept in memory, and on disk as the file's
/// modification time, set again on every hit, so the order survives a restart.
///
/// A disk error (a full disk, a directory made read-only) turns the tier off for the rest of the
/// run with one warning: renders are then kept in memory only, and no announcement fails. Reads
/// and writes block, so `load` and `store` run them on a thread of their own.
final class RenderCacheDisk: Sendable {
    /// A render's key as the disk knows it: the key's bytes and the name of its file.
    struct Key: Sendable, Hashable {
        let bytes: [UInt8]
        let name: String

        init(bytes: [UInt8]) {
            self.bytes = bytes
            self.name = RenderKeyHash.name(of: bytes)
        }
    }

    /// What the tier has done, for `/metrics`.
    struct Statistics: Sendable, Hashable {
        var hits = 0
        var evictions = 0
        /// The bytes of the files held.
        var bytes = 0
        var entries = 0
    }

    private struct State {
        /// The files by name, with their sizes.
        var files = RecencyList<String, Void>()
        var hits = 0
        /// Set by the first disk error: the tier is off from then on.
        var isOff = false
        /// Numbers the files being written, so two writes of one key never share a name.
        var writes = 0
    }

    /// The suffix of a render's file.
    static let suffix = ".render"
    /// The suffix of a file being written; one left by a daemon that was killed is removed.
    static let writingSuffix = ".writing"

    let directory: String
    /// The most bytes of files held.
    let capacity: Int
    /// The largest file kept: a quarter of the capacity, as in memory.
    var maxEntryBytes: Int { capacity / 4 }
    private let state = Mutex(State())
    private let logger: Logger

    /// Opens `directory`, making it (mode 0700) when it is missing, and lists the renders it
    /// holds, evicting the least recently used beyond `capacity`; nil, with one warning, when
    /// the directory cannot be used.
    init?(directory: String, capacity: Int, logger: Logger) {
        self.directory = directory
        self.capacity = capacity
        self.logger = logger
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            Self.warn(logger, directory: directory, DiskError("create the directory"))
            return nil
        }
        // Never followed out of the state directory: a symbolic link (or anything but a
        // directory of this user's, closed to others) there is refused, and each file is opened
        // with O_NOFOLLOW.
        var status = stat()
        guard lstat(directory, &status) == 0 else {
            Self.warn(logger, directory: directory, DiskError("examine the directory"))
            return nil
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            let link = status.st_mode & S_IFMT == S_IFLNK
            Self.warn(
                logger, directory: directory,
                DiskError(
                    link
                        ? "use a symbolic link as the directory: renders are kept in the state directory only"
                        : "use it as the directory", code: link ? ELOOP : ENOTDIR))
            return nil
        }
        guard status.st_uid == geteuid(), status.st_mode & 0o022 == 0 else {
            Self.warn(
                logger, directory: directory,
                DiskError("use the directory: it must be speakd's user's and not writable by others", code: EPERM))
            return nil
        }
        guard let found = Self.list(directory) else {
            Self.warn(logger, directory: directory, DiskError("list the directory"))
            return nil
        }
        // Oldest first, so the clock keeps their order.
        let sorted = found.sorted { ($0.modified, $0.name) < ($1.modified, $1.name) }
        let evicted = state.withLock { state in
            for file in sorted { state.files.insert((), bytes: file.bytes, for: file.name) }
            return state.files.evict(toFit: 0, capacity: capacity)
        }
        for name in evicted { unlink(path(of: name)) }
    }

    var statistics: Statistics {
        state.withLock { state in
            Statistics(
                hits: state.hits, evictions: state.files.evictions, bytes: state.files.bytes,
                entries: state.files.count)
        }
    }

    /// Whether a file may hold `key`: false without reading anything when none has its name.
    func mayHold(_ key: Key) -> Bool {
        state.withLock { !$0.isOff && $0.files.contains(key.name) }
    }

    /// The chunks stored under `key`, read on a thread of its own.
    func load(_ key: Key) async -> [PCMChunk]? {
        await withCheckedContinuation { continuation in
            DetachedThread.start(name: "speakd-cache-io") { continuation.resume(returning: self.read(key)) }
        }
    }

    /// Keeps a whole render of `bytes` bytes of audio under `key`, written on a thread of its own.
    func store(_ chunks: [PCMChunk], bytes: Int, for key: Key) async {
        guard bytes <= maxEntryBytes, !state.withLock({ $0.isOff }) else { return }
        await withCheckedContinuation { continuation in
            DetachedThread.start(name: "speakd-cache-io") {
                self.write(chunks, for: key)
                continuation.resume()
            }
        }
    }

    /// The chunks stored under `key`; nil when no file holds them. A damaged file is removed.
    func read(_ key: Key) -> [PCMChunk]? {
        guard mayHold(key) else { return nil }
        let path = path(of: key.name)
        let contents: [UInt8]
        do {
            contents = try Self.readFile(path, limit: capacity)
        } catch let error where error.code == ENOENT {
            // Evicted by a write that raced this read, or removed by hand.
            forget(key.name)
            return nil
        } catch {
            turnOff(error)
            return nil
        }
        let chunks: [PCMChunk]?
        do {
            chunks = try RenderCacheFile.decode(contents, key: key.bytes)
        } catch {
            logger.info(
                "a damaged render cache file was removed",
                metadata: ["speakd.file": "\(path)", "speakd.error": "\(error)"])
            unlink(path)
            forget(key.name)
            return nil
        }
        // Another key under the same name: a miss, and the render that follows replaces it.
        guard let chunks else { return nil }
        // Its modification time is its last use, for the order after a restart.
        utimensat(AT_FDCWD, path, nil, 0)
        state.withLock { state in
            _ = state.files.use(key.name)
            state.hits += 1
        }
        return chunks
    }

    /// Writes `chunks` under `key`, then evicts the least recently used files beyond the capacity.
    func write(_ chunks: [PCMChunk], for key: Key) {
        let contents = RenderCacheFile.encode(chunks, key: key.bytes)
        guard contents.count <= maxEntryBytes else { return }
        let serial = state.withLock { state -> Int? in
            state.writes += 1
            return state.isOff ? nil : state.writes
        }
        guard let serial else { return }
        let writing = PathText.join(directory, ".\(key.name).\(getpid()).\(serial)\(Self.writingSuffix)")
        do throws(DiskError) {
            try Self.writeFile(writing, contents)
            guard rename(writing, path(of: key.name)) == 0 else { throw DiskError("rename \(writing)") }
        } catch {
            unlink(writing)
            turnOff(error)
            return
        }
        let evicted = state.withLock { state in
            state.files.insert((), bytes: contents.count, for: key.name, capacity: capacity)
        }
        for name in evicted { unlink(path(of: name)) }
    }

    private func path(of name: String) -> String {
        PathText.join(directory, name + Self.suffix)
    }

    /// Drops `name` from the list, its file already gone.
    private func forget(_ name: String) {
        state.withLock { $0.files.remove(name) }
    }

    /// Turns the tier off after `error`, warning once.
    private func turnOff(_ error: DiskError) {
        let first = state.withLock { state in
            defer { state.isOff = true }
            return !state.isOff
        }
        if first { Self.warn(logger, directory: directory, error) }
    }

    private static func warn(_ logger: Logger, directory: String, _ error: DiskError) {
        logger.warning(
            "the render cache keeps renders in memory only: its directory on disk cannot be used",
            metadata: ["speakd.directory": "\(directory)", "speakd.error": "\(error)"])
    }
}

extension RenderCacheDisk {
    /// A failed system call: what was being done, and `errno`.
    struct DiskError: Error, CustomStringConvertible {
        let operation: String
        let code: Int32

        init(_ operation: String, code: Int32 = errno) {
            self.operation = operation
            self.code = code
        }

        var description: String { "cannot \(operation): \(String(cString: strerror(code)))" }
    }

    /// A render's file as listing finds it.
    struct Listed {
        var name: String
        var bytes: Int
        /// Its modification time in nanoseconds: its last use.
        var modified: Int
    }

    /// The renders in `directory`; files a killed daemon left half-written are removed, and
    /// files of other names left alone. Nil when the directory cannot be read.
    static func list(_ directory: String) -> [Listed]? {
        guard let names = names(in: directory) else { return nil }
        var found: [Listed] = []
        for name in names {
            let path = PathText.join(directory, name)
            if name.hasPrefix("."), name.hasSuffix(writingSuffix) {
                unlink(path)
                continue
            }
            var status = stat()
            guard name.hasSuffix(suffix), stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            found.append(
                Listed(
                    name: String(name.dropLast(suffix.count)), bytes: Int(status.st_size),
                    modified: Int(status.st_mtim.tv_sec) * 1_000_000_000 + Int(status.st_mtim.tv_nsec)))
        }
        return found
    }

    /// The names in `directory` but `.` and `..`, in the order of their bytes; nil when it cannot
    /// be read.
    static func names(in directory: String) -> [String]? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The contents of the file at `path`; a file over `limit` bytes is read as empty, which no
    /// render file is, so it is removed as damaged.
    static func readFile(_ path: String, limit: Int) throws(DiskError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw DiskError("open \(path)") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw DiskError("read \(path)") }
        let size = Int(status.st_size)
        guard size <= limit else { return [] }
        var failure: DiskError?
        let contents = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            while initialized < size {
                let count = Glibc.read(descriptor, buffer.baseAddress! + initialized, size - initialized)
                if count < 0 && errno == EINTR { continue }
                if count < 0 { failure = DiskError("read \(path)") }
                // A file that shrank while it was read ends early, and fails its checksum.
                if count <= 0 { break }
                initialized += count
            }
        }
        if let failure { throw failure }
        return contents
    }

    /// Writes `contents` to a new file at `path`, readable by this user only.
    static func writeFile(_ path: String, _ contents: [UInt8]) throws(DiskError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw DiskError("create \(path)") }
        var written = 0
        let failure = contents.withUnsafeBytes { raw -> DiskError? in
            while written < raw.count {
                let count = Glibc.write(descriptor, raw.baseAddress! + written, raw.count - written)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return DiskError("write \(path)") }
                written += count
            }
            return nil
        }
        // A full disk may show itself only when the file is closed.
        if close(descriptor) != 0, failure == nil { throw DiskError("write \(path)") }
        if let failure { throw failure }
    }
}
