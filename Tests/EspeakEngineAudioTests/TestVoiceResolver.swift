import SpeechModel

/// A small resolver for the engine tests: exact tag, then the tag's language alone, over
/// espeak-ng's own voice list, with `en` as the default language.
struct TestVoiceResolver: VoiceResolving {
    let voices: [VoiceInfo]
    var variant: String?

    func voice(for tag: LanguageTag?) throws(SpeechInputError) -> VoiceInfo {
        let wanted = (tag?.canonical ?? "en-GB").lowercased()
        let language = String(wanted.split(separator: "-").first ?? "")
        let found =
            voices.first { $0.languages.contains { $0.lowercased() == wanted } }
            ?? voices.first { $0.languages.contains { $0.lowercased() == language } }
        guard var found else { throw .notFound(field: "language", "no voice for '\(wanted)'") }
        found.variant = variant
        return found
    }

    /// espeak-ng's own lists, unchanged: the engine tests check how espeak-ng's language names
    /// become BCP 47 tags. (Where two voices list one tag, `voice(for:)` reaches the first.)
    var servedVoices: [VoiceInfo] { voices }
}
