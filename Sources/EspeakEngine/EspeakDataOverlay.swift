import Foundation

/// A private espeak-ng data directory: the system data, plus the project's voice variants.
///
/// espeak-ng 1.51 loads a variant named in `voice+variant` only from `voices/!v/` under its data
/// directory (and `espeak_SetVoiceByFile` does not take variants from elsewhere), so installing
/// one would need root. Instead this builds a directory of symbolic links mirroring the system
/// data, whose `voices/!v/` also holds the extra variants, and espeak-ng is initialised with it.
enum EspeakDataOverlay {
    /// Builds (or rebuilds) the overlay in `directory` over `systemData` with the variant files
    /// found in `variants`; returns the overlay's path.
    static func build(systemData: String, variants: String, in directory: URL) throws(EspeakError) -> String {
        let files = FileManager.default
        let system = URL(fileURLWithPath: systemData, isDirectory: true)
        let root = directory
        do {
            if files.fileExists(atPath: root.path) { try files.removeItem(at: root) }
            try files.createDirectory(at: root, withIntermediateDirectories: true)
            try link(contentsOf: system, into: root, except: "voices")
            let voices = root.appendingPathComponent("voices", isDirectory: true)
            try files.createDirectory(at: voices, withIntermediateDirectories: true)
            try link(contentsOf: system.appendingPathComponent("voices", isDirectory: true), into: voices, except: "!v")
            let variantDirectory = voices.appendingPathComponent("!v", isDirectory: true)
            try files.createDirectory(at: variantDirectory, withIntermediateDirectories: true)
            try link(contentsOf: system.appendingPathComponent("voices/!v", isDirectory: true), into: variantDirectory, except: nil)
            for name in try files.contentsOfDirectory(atPath: variants) where !name.hasPrefix(".") && !name.contains(".") {
                let source = URL(fileURLWithPath: variants).appendingPathComponent(name)
                let target = variantDirectory.appendingPathComponent(name)
                if files.fileExists(atPath: target.path) { try files.removeItem(at: target) }
                try files.copyItem(at: source, to: target)
            }
        } catch {
            throw .dataDirectory("build data directory \(root.path) over \(systemData) with variants from \(variants)", "\(error)")
        }
        return root.path
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
