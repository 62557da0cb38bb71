/// A voice the renderer can speak with, and the BCP 47 tags it serves.
public struct VoiceInfo: Sendable, Hashable, Codable {
    /// The renderer's own identifier (espeak-ng: the voice file, `roa/pt`).
    public var identifier: String
    public var name: String
    /// BCP 47 tags this voice serves, most specific first.
    public var languages: [String]
    /// A variant applied on top of the voice (`speakd-kiosk`), if any.
    public var variant: String?

    public init(identifier: String, name: String, languages: [String], variant: String? = nil) {
        self.identifier = identifier
        self.name = name
        self.languages = languages
        self.variant = variant
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
