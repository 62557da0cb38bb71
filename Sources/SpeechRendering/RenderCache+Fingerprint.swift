#if canImport(Glibc)
import Glibc
#endif

extension RenderCache {
    /// The identity of a render cache in front of `engines` (`CachingRenderer.identity`): speakd's
    /// version and each engine's name, version and details as the engine says them; for a cache
    /// kept on disk (`onDisk`), where a render outlives the process, also the fingerprint of the
    /// files the engines render with and the names they count (`fingerprint(ofFilesUnder:with:)`),
    /// so an upgrade of any of them misses every render made before it.
    public static func identity(speakd version: String, engines: [EngineIdentity], onDisk: Bool) -> String {
        var identity = (["speakd \(version)"] + engines.map(\.description)).joined(separator: "; ")
        if onDisk {
            identity +=
                "; files " + fingerprint(ofFilesUnder: engines.flatMap(\.files), with: engines.flatMap(\.names))
        }
        return identity
    }

    /// The largest file whose contents a fingerprint reads; larger ones count by size and time.
    static let fingerprintReadLimit = 64 << 10

    /// 32 hexadecimal digits that change when the files an engine reads change: for the identity
    /// of a cache kept on disk, where a render must not outlive the engine or data that made it
    /// (an upgraded espeak-ng data package, a retrained Piper voice, a rebuilt engine worker).
    ///
    /// Every file under each of `trees` (a file, or a directory walked to eight levels, through
    /// symbolic links) counts by its path inside the tree and its size, and by its contents when
    /// it is small (voice and variant files, a voice's configuration), else by its modification
    /// time (dictionaries, models, executables: a package's files keep the time they were built
    /// with). Contents, not times, for small files, because a private espeak-ng data directory
    /// copies its variants anew at each start. A tree's own path does not count: the private data
    /// directory's changes at each start. `names` count as they are (the installed versions of a
    /// Python environment's packages).
    ///
    /// It reads every small file, so it is made once, at the start, and only for a disk cache.
    public static func fingerprint(ofFilesUnder trees: [String], with names: [String] = []) -> String {
        var key = RenderKeyWriter()
        for tree in trees { Self.fingerprint(tree, as: "", depth: 8, into: &key) }
        key.write(names)
        return RenderKeyHash.name(of: key.bytes)
    }

    private static func fingerprint(_ path: String, as relative: String, depth: Int, into key: inout RenderKeyWriter) {
        key.write(relative)
        var status = stat()
        guard stat(path, &status) == 0 else {
            key.write("(missing)")
            return
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            guard depth > 0, let names = RenderCacheDisk.names(in: path) else {
                key.write("(unread directory)")
                return
            }
            key.write(names.count)
            for name in names {
                fingerprint(path + "/" + name, as: relative + "/" + name, depth: depth - 1, into: &key)
            }
            return
        }
        let size = Int(status.st_size)
        key.write(size)
        if size <= fingerprintReadLimit, let contents = try? RenderCacheDisk.readFile(path, limit: size) {
            key.write(contents.withUnsafeBytes { Int(bitPattern: UInt(RenderKeyHash.checksum($0))) })
        } else {
            key.write(Int(status.st_mtim.tv_sec) * 1_000_000_000 + Int(status.st_mtim.tv_nsec))
        }
    }
}
