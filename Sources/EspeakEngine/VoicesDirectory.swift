import FoundationEssentials
import Logging
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// A speakd voices directory: `overrides` (BCP 47 tag → espeak voice) and `variants/` (the
/// project's espeak voice variants), as in the repository's `Voices/`.
public struct VoicesDirectory: Sendable, Hashable {
    public let url: URL

    public init(_ url: URL) {
        self.url = url
    }

    /// The directory's `overrides`; the built-in copy when the directory has no such file.
    public func overrides() throws -> VoiceOverrides {
        let file = url.appendingPathComponent("overrides")
        guard FileManager.default.fileExists(atPath: file.path) else { return .builtIn }
        return try VoiceOverrides(contentsOf: file)
    }

    /// The directory's `variants/`, if it has one.
    public var variantsPath: String? {
        let path = url.appendingPathComponent("variants").path
        var isDirectory = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory
            ? path : nil
    }

    /// Where speakd looks when no directory is configured: `$SPEAKD_VOICES`, the install
    /// locations, then the `Voices/` of the source tree an executable was built in.
    public static func discover(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        executable: URL = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
    ) -> VoicesDirectory? {
        if let configured = environment["SPEAKD_VOICES"], !configured.isEmpty {
            return VoicesDirectory(URL(fileURLWithPath: configured))
        }
        var candidates = ["/usr/local/share/speakd/voices", "/usr/share/speakd/voices"].map {
            URL(fileURLWithPath: $0)
        }
        // A development build lives in `<tree>/.build/<triple>/<configuration>/`.
        var directory = executable.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("Voices"))
            directory = directory.deletingLastPathComponent()
        }
        return candidates.first {
            FileManager.default.fileExists(atPath: $0.appendingPathComponent("overrides").path)
        }.map(VoicesDirectory.init)
    }
}

extension EspeakEngine {
    /// An engine whose languages resolve through `voices` (overrides first, espeak-ng's own
    /// voices second), with the directory's variants available as `voice+name`.
    ///
    /// - Parameters:
    ///   - voices: the voices directory; nil for the built-in overrides and no variants.
    ///   - defaultLanguage: the language of utterances that name none (`en-US` when nil).
    ///   - fallback: the language used when a tag resolves to nothing; nil makes that an error.
    ///   - configuration: the rest of the engine's set-up; its `variantsDirectory` is taken from
    ///     `voices` when it has neither that nor a `dataPath`.
    ///   - logger: where the engine logs; overrides naming voices that are not installed are reported here.
    public convenience init(
        voices: VoicesDirectory?, defaultLanguage: LanguageTag? = nil, fallback: LanguageTag? = nil,
        configuration: Configuration = Configuration(), logger: Logger = Logger(label: "speakd.espeak")
    ) async throws {
        let overrides = try voices?.overrides() ?? .builtIn
        var configuration = configuration
        // A data directory given explicitly is used as it is: it may be an overlay another engine
        // built with these variants already (the daemon's, for its workers).
        if configuration.variantsDirectory == nil && configuration.dataPath == nil {
            configuration.variantsDirectory = voices?.variantsPath
        }
        try await self.init(configuration: configuration, logger: logger) { espeakVoices in
            let catalog = VoiceCatalog(
                voices: espeakVoices, overrides: overrides, defaultLanguage: defaultLanguage, fallback: fallback)
            for entry in catalog.danglingOverrides {
                logger.warning(
                    "voice override names a voice espeak-ng does not have; skipped",
                    metadata: ["voices.tag": "\(entry.tag)", "voices.voice": "\(entry.voice)"])
            }
            return catalog
        }
    }
}
