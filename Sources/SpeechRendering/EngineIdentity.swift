/// What one engine is, as the render cache keys its renders (`CachingRenderer.identity`): a
/// render by another engine, another version of it, or other voices or data is another render.
/// Each engine says its own (`SpeechRenderer.engineIdentities`); the daemon joins them.
public struct EngineIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The engine's name (`espeak-ng`, `piper`).
    public var name: String
    /// Its version as the engine reads it itself (espeak-ng's library, the `piper-tts` package);
    /// nil when it cannot say.
    public var version: String?
    /// What else it renders with that is cheap to say: Piper's voices by name.
    public var details: [String]
    /// The files and directories it renders with (its executable, data, voices): for a cache kept
    /// on disk, their fingerprint joins the identity (`RenderCache.fingerprint`), as it costs a
    /// read of every small file.
    public var files: [String]
    /// Names that count as they are in that fingerprint: the installed versions of a Python
    /// environment's packages (`numpy-2.4.6.dist-info`).
    public var names: [String]

    public init(
        name: String, version: String? = nil, details: [String] = [], files: [String] = [], names: [String] = []
    ) {
        self.name = name
        self.version = version
        self.details = details
        self.files = files
        self.names = names
    }

    /// `piper 1.8.0 (amy,joe)`: the name, the version and the details, without the files.
    public var description: String {
        name + (version.map { " \($0)" } ?? "") + (details.isEmpty ? "" : " (\(details.joined(separator: ",")))")
    }
}
