/// A voice the renderer can speak with, and the BCP 47 tags it serves.
public struct VoiceInfo: Sendable, Hashable, Codable {
    /// The renderer's own identifier (espeak-ng: the voice file, `roa/pt`).
    public var identifier: String
    public var name: String
    /// BCP 47 tags this voice serves, most specific first.
    public var languages: [String]
    /// A variant applied on top of the voice (`speakd-kiosk`), if any.
    public var variant: String?
    /// The engine that speaks it (`piper`); nil for espeak-ng, the default engine.
    public var engine: String?
    /// The voice's own sample rate in Hz, where the engine has one per voice (Piper).
    public var sampleRate: Int?
    /// The voice's quality as its model card gives it (Piper: `low`, `medium`, `high`).
    public var quality: String?

    public init(
        identifier: String, name: String, languages: [String], variant: String? = nil, engine: String? = nil,
        sampleRate: Int? = nil, quality: String? = nil
    ) {
        self.identifier = identifier
        self.name = name
        self.languages = languages
        self.variant = variant
        self.engine = engine
        self.sampleRate = sampleRate
        self.quality = quality
    }
}

/// Picks the voice for a language: overrides first, then the renderer's own voices.
public protocol VoiceResolving: Sendable {
    /// The voice for `tag`, or for the default language when `tag` is nil.
    /// A tag that resolves to nothing throws `SpeechInputError.notFound` naming the tag.
    func voice(for tag: LanguageTag?) throws(SpeechInputError) -> VoiceInfo

    /// Every voice the resolver chooses from, each with the BCP 47 tags that resolve to it, so
    /// a voice list (`GET /v1/voices`, `speak voices`) shows what resolution does.
    var servedVoices: [VoiceInfo] { get }
}
