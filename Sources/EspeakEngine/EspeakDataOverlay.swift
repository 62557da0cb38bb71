import FoundationEssentials
import SpeechModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A private espeak-ng data directory: the system data, plus the project's voice variants.
///
/// espeak-ng 1.51 loads a variant named in `voice+variant` only from `voices/!v/` under its data
/// directory (and `espeak_SetVoiceByFile` does not take variants from elsewhere), so installing
/// one would need root. Instead this builds a directory of symbolic links mirroring the system
/// data, whose `voices/!v/` also holds the extra variants, and espeak-ng is initialised with it.
///
/// The overlays a process built are removed when it exits (`exit`, or returning from `main`);
/// those of a process that was killed are removed by the next one to build an overlay in the
/// same directory (`removeStale`).
enum EspeakDataOverlay {
    /// Serialises builds in this process: two engines with the same variants share one overlay,
    /// and one must not replace it while the other builds or reads it. Holds the overlays built.
    private static let building = Mutex<Set<String>>([])

    /// Registers the removal of this process's overlays at its exit, once.
    private static let removedAtExit: Void = {
        atexit { EspeakDataOverlay.removeBuilt() }
    }()

    /// Builds the overlay in `directory` over `systemData` with the variant files found in
    /// `variants`, or refreshes its variants when it exists; returns the overlay's path.
    ///
    /// An existing overlay is never taken down: another engine of this process may be reading it.
    static func build(systemData: String, variants: String, in directory: URL) throws(EspeakError) -> String {
        _ = removedAtExit
        return try building.withLock { built throws(EspeakError) in
            let path = try buildUnlocked(systemData: systemData, variants: variants, in: directory)
            built.insert(path)
            return path
        }
    }

    /// Removes the overlays this process built. Its engine workers, which read an overlay, are
    /// not a concern: they end with the process, and espeak-ng has loaded its data by then.
    static func removeBuilt() {
        let paths = building.withLock { built in
            defer { built.removeAll() }
            return built
        }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The mode of the overlay's directories, set whatever the umask: only this process's user
    /// may change what espeak-ng reads (a group-writable overlay let any client of the group
    /// replace a dictionary). Under a root daemon the workers run as another user and must read
    /// it, so it is world-readable there; what it holds is the public espeak-ng data.
    static var directoryMode: mode_t { geteuid() == 0 ? 0o755 : 0o700 }

    /// The mode of the variant files copied in, by the same rule.
    static var fileMode: mode_t { geteuid() == 0 ? 0o644 : 0o600 }

    private static func buildUnlocked(
        systemData: String, variants: String, in directory: URL
    ) throws(EspeakError) -> String {
        let files = FileManager.default
        let system = URL(fileURLWithPath: systemData, isDirectory: true)
        let root = directory
        let variantDirectory = root.appendingPathComponent("voices/!v", isDirectory: true)
        do {
            if !files.fileExists(atPath: variantDirectory.path) {
                // Built aside and renamed into place, so a half-built overlay is never seen.
                let staging = root.deletingLastPathComponent().appendingPathComponent(
                    ".\(root.lastPathComponent)-\(UUID().uuidString)")
                try files.createDirectory(at: staging, withIntermediateDirectories: true)
                try link(contentsOf: system, into: staging, except: "voices")
                let voices = staging.appendingPathComponent("voices", isDirectory: true)
                try files.createDirectory(at: voices, withIntermediateDirectories: true)
                try link(
                    contentsOf: system.appendingPathComponent("voices", isDirectory: true), into: voices, except: "!v")
                let stagedVariants = voices.appendingPathComponent("!v", isDirectory: true)
                try files.createDirectory(at: stagedVariants, withIntermediateDirectories: true)
                try link(
                    contentsOf: system.appendingPathComponent("voices/!v", isDirectory: true), into: stagedVariants,
                    except: nil)
                for made in [staging, voices, stagedVariants] { try setMode(directoryMode, of: made) }
                if files.fileExists(atPath: root.path) { try files.removeItem(at: root) }
                try files.moveItem(at: staging, to: root)
            }
            for name in try files.contentsOfDirectory(atPath: variants)
            where !name.hasPrefix(".") && !name.contains(".") {
                let source = URL(fileURLWithPath: variants).appendingPathComponent(name)
                let target = variantDirectory.appendingPathComponent(name)
                // Replaced by rename, so espeak-ng never reads a half-written variant.
                let staged = variantDirectory.appendingPathComponent(".\(name)-\(UUID().uuidString)")
                try files.copyItem(at: source, to: staged)
                try setMode(fileMode, of: staged)
                if rename(staged.path, target.path) != 0 {
                    throw EspeakError.dataDirectory(
                        "rename \(staged.path) to \(target.path)", String(cString: strerror(errno)))
                }
            }
        } catch {
            throw .dataDirectory(
                "build data directory \(root.path) over \(systemData) with variants from \(variants)",
                fileErrorReason(error))
        }
        return root.path
    }

    /// Sets `mode` on the directory or regular file at `url` (never through a symbolic link).
    private static func setMode(_ mode: mode_t, of url: URL) throws(EspeakError) {
        if chmod(url.path, mode) != 0 {
            throw EspeakError.dataDirectory("chmod \(url.path)", String(cString: strerror(errno)))
        }
    }

    /// Removes overlays left in `directory` by processes that have exited (`speakd-espeak-PID-…`).
    static func removeStale(in directory: URL) {
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix("speakd-espeak-") {
            let parts = name.split(separator: "-")
            guard parts.count >= 3, let pid = Int32(parts[2]), pid != getpid() else { continue }
            if kill(pid, 0) != 0, errno == ESRCH {
                try? files.removeItem(at: directory.appendingPathComponent(name))
            }
        }
    }

    private static func link(contentsOf source: URL, into target: URL, except excluded: String?) throws {
        let files = FileManager.default
        guard files.fileExists(atPath: source.path) else { return }
        for name in try files.contentsOfDirectory(atPath: source.path) where name != excluded {
            try files.createSymbolicLink(
                at: target.appendingPathComponent(name), withDestinationURL: source.appendingPathComponent(name))
        }
    }
}
