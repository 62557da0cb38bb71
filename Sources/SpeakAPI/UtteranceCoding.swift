import SpeechModel

/// Reads and writes the utterance fields of a request body.
///
/// The speech model owns the wire form of an utterance; until its `Codable` conformance is part
/// of this package, this is the reading of the DESIGN wire format that the API types use:
/// `text` or `spans`, plus the utterance defaults. Errors name the field.
enum UtteranceCoding {
    private enum Keys: String, CodingKey {
        case text, spans, ssml, language, pitch, rate, volume, punctuation, spellOut, ipa, pause
    }

    static func decode(from decoder: any Decoder) throws -> Utterance {
        let container = try decoder.container(keyedBy: Keys.self)
        let defaults = try attributes(in: container, prefix: nil)
        let text = try container.decodeIfPresent(String.self, forKey: .text)
        let hasSpans = container.contains(.spans)
        if container.contains(.ssml) {
            throw SpeechInputError.unsupported(field: "ssml", "SSML input is not supported by this build")
        }
        switch (text, hasSpans) {
        case (.some, true):
            throw SpeechInputError.malformed(field: "spans", "give either text or spans, not both")
        case (nil, false):
            throw SpeechInputError.malformed(field: "text", "text (or spans) is required")
        case (let text?, false):
            return Utterance(text, defaults: defaults)
        case (nil, true):
            var spansContainer = try container.nestedUnkeyedContainer(forKey: .spans)
            var spans: [Span] = []
            while !spansContainer.isAtEnd {
                let index = spansContainer.currentIndex
                let spanContainer = try spansContainer.nestedContainer(keyedBy: Keys.self)
                guard let spanText = try spanContainer.decodeIfPresent(String.self, forKey: .text) else {
                    throw SpeechInputError.malformed(field: "spans[\(index)].text", "every span needs text")
                }
                let spanAttributes = try attributes(in: spanContainer, prefix: "spans[\(index)]")
                let pause = try spanContainer.decodeIfPresent(Double.self, forKey: .pause)
                spans.append(Span(spanText, attributes: spanAttributes, pauseAfter: pause))
            }
            return Utterance(spans: spans, defaults: defaults)
        }
    }

    private static func attributes(in container: KeyedDecodingContainer<Keys>, prefix: String?) throws -> SpeechAttributes {
        var attributes = SpeechAttributes(
            pitch: try container.decodeIfPresent(Double.self, forKey: .pitch),
            rate: try container.decodeIfPresent(Double.self, forKey: .rate),
            volume: try container.decodeIfPresent(Double.self, forKey: .volume),
            punctuation: try container.decodeIfPresent(Bool.self, forKey: .punctuation),
            spellOut: try container.decodeIfPresent(Bool.self, forKey: .spellOut),
            ipa: try container.decodeIfPresent(String.self, forKey: .ipa))
        if let tag = try container.decodeIfPresent(String.self, forKey: .language) {
            do {
                attributes.language = try LanguageTag(tag)
            } catch {
                throw prefix.map { error.nested(in: $0) } ?? error
            }
        }
        do {
            try attributes.validate()
        } catch {
            throw prefix.map { error.nested(in: $0) } ?? error
        }
        return attributes
    }

    static func encode(_ utterance: Utterance, to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try encode(utterance.defaults, into: &container)
        if utterance.spans.count == 1, utterance.spans[0].attributes == SpeechAttributes(),
            utterance.spans[0].pauseAfter == nil
        {
            try container.encode(utterance.spans[0].text, forKey: .text)
            return
        }
        var spans = container.nestedUnkeyedContainer(forKey: .spans)
        for span in utterance.spans {
            var spanContainer = spans.nestedContainer(keyedBy: Keys.self)
            try spanContainer.encode(span.text, forKey: .text)
            try encode(span.attributes, into: &spanContainer)
            try spanContainer.encodeIfPresent(span.pauseAfter, forKey: .pause)
        }
    }

    private static func encode(_ attributes: SpeechAttributes, into container: inout KeyedEncodingContainer<Keys>) throws {
        try container.encodeIfPresent(attributes.language?.canonical, forKey: .language)
        try container.encodeIfPresent(attributes.pitch, forKey: .pitch)
        try container.encodeIfPresent(attributes.rate, forKey: .rate)
        try container.encodeIfPresent(attributes.volume, forKey: .volume)
        try container.encodeIfPresent(attributes.punctuation, forKey: .punctuation)
        try container.encodeIfPresent(attributes.spellOut, forKey: .spellOut)
        try container.encodeIfPresent(attributes.ipa, forKey: .ipa)
    }
}
