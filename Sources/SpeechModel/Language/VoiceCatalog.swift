/// Resolves BCP 47 tags to voices: overrides first, then the renderer's own voice list.
///
/// Resolution is RFC 4647 lookup: for each of the tag's `lookupCandidates`, most specific first,
/// the overrides are asked, then the voices' tags (case-insensitively); the first hit wins. So an
/// override for `es-AR` beats espeak's `es`, and a voice serving `en-GB-x-rp` is found for
/// `en-GB-x-rp` itself while `en-GB-x-foo` falls back to `en-GB`.
public struct VoiceCatalog: VoiceResolving {
    /// How a tag reached its voice.
    public struct Resolution: Sendable, Hashable {
        public enum Source: String, Sendable, Hashable {
            case override
            case voice
            case fallback
        }

        /// The voice, with the override's variant applied when an override matched.
        public var voice: VoiceInfo
        /// The candidate tag that matched (`es-AR`, `en`), as written in the override or voice.
        public var matchedTag: String
        public var source: Source
    }

    /// The renderer's voices.
    public let voices: [VoiceInfo]
    public let overrides: VoiceOverrides
    /// The language of `voice(for: nil)`.
    public let defaultLanguage: LanguageTag
    /// Used when a tag resolves to nothing; nil makes such a tag an error.
    public let fallback: LanguageTag?

    private let voicesByIdentifier: [String: VoiceInfo]
    /// Lowercased canonical tag → voices serving it, best first.
    private let voicesByTag: [String: [VoiceInfo]]

    /// A catalog over `voices`, with `overrides` taking precedence.
    /// - Parameters:
    ///   - voices: the renderer's voices and the tags each serves, most specific first.
    ///   - overrides: tag → voice entries that beat the renderer's own tags.
    ///   - defaultLanguage: the language of `voice(for: nil)`; `en-US` unless set.
    ///   - fallback: the language used when a tag resolves to nothing.
    public init(
        voices: [VoiceInfo], overrides: VoiceOverrides = VoiceOverrides(),
        defaultLanguage: LanguageTag? = nil, fallback: LanguageTag? = nil
    ) {
        self.voices = voices
        self.overrides = overrides
        // A literal that the parser accepts; a failure here is a bug in the parser.
        self.defaultLanguage = defaultLanguage ?? (try! LanguageTag("en-US"))
        self.fallback = fallback

        var byIdentifier: [String: VoiceInfo] = [:]
        for voice in voices where byIdentifier[voice.identifier] == nil { byIdentifier[voice.identifier] = voice }
        voicesByIdentifier = byIdentifier

        // A voice whose first tag is the one asked for beats a voice that lists it further down
        // (espeak's `roa/pt-BR` also lists `pt`, after `pt-br`); ties keep the renderer's order.
        var ranked: [String: [(rank: Int, order: Int, voice: VoiceInfo)]] = [:]
        for (order, voice) in voices.enumerated() {
            for (rank, language) in voice.languages.enumerated() {
                let key = Self.key(for: language)
                guard ranked[key]?.contains(where: { $0.voice.identifier == voice.identifier }) != true else {
                    continue
                }
                ranked[key, default: []].append((rank, order, voice))
            }
        }
        voicesByTag = ranked.mapValues { entries in
            entries.sorted { ($0.rank, $0.order) < ($1.rank, $1.order) }.map(\.voice)
        }
    }

    /// The voice for `tag`, or for `defaultLanguage` when `tag` is nil.
    ///
    /// A tag that resolves to nothing is `SpeechInputError.notFound` in the field `language`,
    /// unless a fallback is configured and resolves.
    public func voice(for tag: LanguageTag?) throws(SpeechInputError) -> VoiceInfo {
        try resolve(tag).voice
    }

    /// Like `voice(for:)`, also telling which tag matched and where it came from.
    public func resolve(_ tag: LanguageTag?) throws(SpeechInputError) -> Resolution {
        let tag = tag ?? defaultLanguage
        if let resolution = lookup(tag) { return resolution }
        guard let fallback else {
            throw .notFound(field: "language", "no voice for '\(tag)'")
        }
        guard var resolution = lookup(fallback) else {
            throw .notFound(field: "language", "no voice for '\(tag)', nor for the fallback '\(fallback)'")
        }
        resolution.source = .fallback
        return resolution
    }

    /// Overrides whose voice is not among `voices`; lookup skips them. Worth a warning at start-up.
    public var danglingOverrides: [VoiceOverrides.Entry] {
        overrides.entries.filter { voicesByIdentifier[$0.voice] == nil }
    }

    /// Every voice with the tags that resolve to it exactly, after overrides (for listing voices).
    ///
    /// `gmw/en-US` gains `en` from the overrides, and `gmw/en` loses it. Tags keep the casing of
    /// their canonical form; a voice that no tag reaches keeps an empty list.
    public var servedVoices: [VoiceInfo] {
        var candidates: [String] = overrides.entries.map(\.tag.canonical)
        for voice in voices {
            candidates += voice.languages.map { (try? LanguageTag($0).canonical) ?? $0 }
        }
        var served: [String: [String]] = [:]
        var seen: Set<String> = []
        for candidate in candidates where seen.insert(candidate.lowercased()).inserted {
            guard let resolution = lookup(exactly: candidate) else { continue }
            served[resolution.voice.identifier, default: []].append(candidate)
        }
        return voices.map { voice in
            var voice = voice
            voice.languages = served[voice.identifier] ?? []
            return voice
        }
    }

    private func lookup(_ tag: LanguageTag) -> Resolution? {
        for candidate in tag.lookupCandidates {
            if let resolution = lookup(exactly: candidate) { return resolution }
        }
        return nil
    }

    private func lookup(exactly candidate: String) -> Resolution? {
        if let entry = overrides.entry(for: candidate), var voice = voicesByIdentifier[entry.voice] {
            if let variant = entry.variant { voice.variant = variant }
            return Resolution(voice: voice, matchedTag: entry.tag.canonical, source: .override)
        }
        if let voice = voicesByTag[Self.key(for: candidate)]?.first {
            return Resolution(voice: voice, matchedTag: candidate, source: .voice)
        }
        return nil
    }

    /// Voices list tags in their own casing (`en-us`) and not always well-formed; compare
    /// canonical forms where the tag parses, raw lowercase otherwise.
    private static func key(for tag: String) -> String {
        ((try? LanguageTag(tag).canonical) ?? tag).lowercased()
    }
}
