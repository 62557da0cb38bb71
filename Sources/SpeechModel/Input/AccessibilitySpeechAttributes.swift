import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

extension AttributeScopes {
    /// Speech attributes for `AttributedString`, named as Apple names them in UIAccessibility
    /// (`accessibilitySpeechPitch`, …), plus rate, volume and a pause, which Apple has no
    /// attributes for.
    ///
    /// With the `AttributeDynamicLookup` members below, `string.accessibilitySpeechPitch = 1.2`
    /// and `run.accessibilitySpeechLanguage` work as on Apple platforms. This is plain
    /// swift-foundation (`AttributeScope`, `AttributedStringKey`, `AttributeDynamicLookup`), which
    /// works the same on Linux; only the `@AttributeScope` macros are left out, so the scope
    /// needs no macro plugin to build.
    ///
    /// swift-foundation on Linux (Swift 6.3) does not make `AttributedString` `Codable`, with or
    /// without `CodableConfiguration`; the keys are `CodableAttributedStringKey`s for platforms
    /// where it is, and the portable way to send an attributed utterance is `Utterance`'s JSON.
    public struct AccessibilitySpeechAttributes: AttributeScope {
        public let accessibilitySpeechPitch: AccessibilitySpeechPitchAttribute
        public let accessibilitySpeechIncludesPunctuation: AccessibilitySpeechIncludesPunctuationAttribute
        public let accessibilitySpeechLanguage: AccessibilitySpeechLanguageAttribute
        public let accessibilitySpeechSpellsOutCharacters: AccessibilitySpeechSpellsOutCharactersAttribute
        public let accessibilitySpeechPhoneticNotation: AccessibilitySpeechPhoneticNotationAttribute
        public let speechRate: SpeechRateAttribute
        public let speechVolume: SpeechVolumeAttribute
        public let speechPauseAfter: SpeechPauseAfterAttribute
    }

    /// The speech attribute scope, for APIs that take a scope key path (`\.accessibilitySpeech`).
    public var accessibilitySpeech: AccessibilitySpeechAttributes.Type { AccessibilitySpeechAttributes.self }
}

extension AttributeScopes.AccessibilitySpeechAttributes {
    /// F0 multiplier of the run, 0.0–2.0, 1.0 normal (`pitch` on the wire).
    public enum AccessibilitySpeechPitchAttribute: CodableAttributedStringKey {
        public typealias Value = Double
        public static let name = "accessibilitySpeechPitch"
    }

    /// true: every punctuation mark is spoken; false: none (`punctuation` on the wire).
    public enum AccessibilitySpeechIncludesPunctuationAttribute: CodableAttributedStringKey {
        public typealias Value = Bool
        public static let name = "accessibilitySpeechIncludesPunctuation"
    }

    /// A BCP 47 tag, parsed when the string becomes an `Utterance` (`language` on the wire).
    public enum AccessibilitySpeechLanguageAttribute: CodableAttributedStringKey {
        public typealias Value = String
        public static let name = "accessibilitySpeechLanguage"
    }

    /// Each character spoken separately (`spellOut` on the wire).
    public enum AccessibilitySpeechSpellsOutCharactersAttribute: CodableAttributedStringKey {
        public typealias Value = Bool
        public static let name = "accessibilitySpeechSpellsOutCharacters"
    }

    /// Pronunciation of the run in IPA (`ipa` on the wire).
    public enum AccessibilitySpeechPhoneticNotationAttribute: CodableAttributedStringKey {
        public typealias Value = String
        public static let name = "accessibilitySpeechPhoneticNotation"
    }

    /// Speaking rate multiplier, 0.5–2.0 × 175 words per minute (`rate` on the wire).
    public enum SpeechRateAttribute: CodableAttributedStringKey {
        public typealias Value = Double
        public static let name = "speechRate"
    }

    /// Volume, 0.0–2.0 (`volume` on the wire).
    public enum SpeechVolumeAttribute: CodableAttributedStringKey {
        public typealias Value = Double
        public static let name = "speechVolume"
    }

    /// Silence after the run, in seconds (`pauseAfter` on the wire, SSML `break`).
    public enum SpeechPauseAfterAttribute: CodableAttributedStringKey {
        public typealias Value = Double
        public static let name = "speechPauseAfter"
    }
}

extension AttributeDynamicLookup {
    /// Makes the speech attributes available as properties (`string.accessibilitySpeechPitch`).
    public subscript<T: AttributedStringKey>(
        dynamicMember keyPath: KeyPath<AttributeScopes.AccessibilitySpeechAttributes, T>
    ) -> T {
        self[T.self]
    }
}

extension Utterance {
    /// The utterance an attributed string describes: one span per run of equal speech
    /// attributes (runs that differ only in other attributes, such as fonts, merge).
    ///
    /// - Parameters:
    ///   - attributed: text with `AccessibilitySpeechAttributes`.
    ///   - defaults: the utterance defaults, which an attributed string has no place for.
    /// - Throws: `SpeechInputError.malformed` naming `spans[i].language` for a malformed tag.
    public init(
        _ attributed: AttributedString, defaults: SpeechAttributes = SpeechAttributes()
    ) throws(SpeechInputError) {
        var spans: [Span] = []
        for run in attributed.runs {
            let text = String(attributed.characters[run.range])
            guard !text.isEmpty else { continue }
            var attributes = SpeechAttributes(
                pitch: run.accessibilitySpeechPitch,
                rate: run.speechRate,
                volume: run.speechVolume,
                punctuation: run.accessibilitySpeechIncludesPunctuation,
                spellOut: run.accessibilitySpeechSpellsOutCharacters,
                ipa: run.accessibilitySpeechPhoneticNotation)
            if let language = run.accessibilitySpeechLanguage {
                // A malformed tag never equals the span before, so the run starts span `spans.count`.
                attributes.language = try LanguageTag(language, field: "spans[\(spans.count)].language")
            }
            if let last = spans.last, last.attributes == attributes, last.pauseAfter == nil {
                spans[spans.count - 1].text += text
                spans[spans.count - 1].pauseAfter = run.speechPauseAfter
            } else {
                spans.append(Span(text, attributes: attributes, pauseAfter: run.speechPauseAfter))
            }
        }
        self.init(spans: spans, defaults: defaults)
    }
}

extension AttributedString {
    /// The utterance as an attributed string: one run per span, carrying the span's own
    /// attributes, or, with `resolvingDefaults`, its attributes after inheriting the defaults.
    ///
    /// Spans with no text (a pause alone) have no run to carry them and are left out; neighbouring
    /// spans with equal attributes become one run.
    public init(_ utterance: Utterance, resolvingDefaults: Bool = false) {
        self.init()
        for span in resolvingDefaults ? utterance.resolvedSpans : utterance.spans {
            var run = AttributedString(span.text)
            let attributes = span.attributes
            run.accessibilitySpeechPitch = attributes.pitch
            run.speechRate = attributes.rate
            run.speechVolume = attributes.volume
            run.accessibilitySpeechIncludesPunctuation = attributes.punctuation
            run.accessibilitySpeechLanguage = attributes.language?.canonical
            run.accessibilitySpeechSpellsOutCharacters = attributes.spellOut
            run.accessibilitySpeechPhoneticNotation = attributes.ipa
            run.speechPauseAfter = span.pauseAfter
            append(run)
        }
    }
}
