import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The wire format of an utterance (DESIGN.md, "Attributed utterances").
///
/// At the top level of the JSON object: exactly one of `text` (a string), `spans` (an array of
/// `{text, language?, pitch?, rate?, volume?, punctuation?, spellOut?, ipa?, voice?, pauseAfter?}`) or
/// `ssml` (a string in speakd's SSML subset), plus the utterance defaults `language`, `pitch`,
/// `rate`, `volume`, `punctuation`, `spellOut` and `voice`, and the `boundaries` as `sentenceStarts` and
/// `paragraphStarts` (arrays of character offsets). Other top-level keys (`priority`, `queue`,
/// `expiresAfter`, …) belong to the request that carries the utterance and are ignored here; an
/// unknown key inside a span is an error. `null` is the same as leaving a key out.
///
/// Decoding throws `SpeechInputError` naming the field in wire terms (`spans[2].pitch`); values
/// are range-checked with `validate()`. `ssml` is parsed with `Utterance(ssml:)`; its
/// `speak xml:lang`, when given, replaces the top-level `language`.
///
/// Encoding writes `text` for a single span without attributes or pause, and `spans` otherwise.
/// `defaults.ipa` has no wire form and is not written.
extension Utterance: Codable {
    public init(from decoder: any Decoder) throws {
        self = try Self.decodeWire(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKey.self)
        if spans.count == 1, spans[0].attributes == SpeechAttributes(), spans[0].pauseAfter == nil,
            spans[0].mark == nil,
            spans[0].clip == nil
        {
            try container.encode(spans[0].text, forKey: "text")
        } else {
            var list = container.nestedUnkeyedContainer(forKey: "spans")
            for span in spans {
                var spanContainer = list.nestedContainer(keyedBy: WireKey.self)
                if let clip = span.clip {
                    try spanContainer.encode(clip, forKey: "clip")
                } else {
                    try spanContainer.encode(span.text, forKey: "text")
                }
                try Self.encode(span.attributes, includingIPA: true, to: &spanContainer)
                try spanContainer.encodeIfPresent(span.pauseAfter, forKey: "pauseAfter")
                try spanContainer.encodeIfPresent(span.mark, forKey: "mark")
            }
        }
        try Self.encode(defaults, includingIPA: false, to: &container)
        for kind in Boundary.allCases {
            let offsets = boundaries.filter { $0.value == kind }.keys.sorted()
            if !offsets.isEmpty { try container.encode(offsets, forKey: WireKey(stringValue: kind.wireKey)) }
        }
    }

    /// Decodes an utterance from a JSON object; every error is a `SpeechInputError` naming the
    /// field in wire terms (`spans[2].pitch`, `language`, `text`), or no field for JSON that
    /// does not parse at all. The JSON must be strict (`StrictJSON`): no trailing commas or
    /// duplicate keys, valid UTF-8, numbers a `Double` holds.
    public static func decode(json: Data) throws(SpeechInputError) -> Utterance {
        try StrictJSON.decode(Utterance.self, from: json)
    }

    /// The keys a span may have.
    static let spanKeys: [String] = [
        "text", "language", "pitch", "rate", "volume", "punctuation", "spellOut", "ipa", "voice", "pauseAfter", "mark",
        "clip",
    ]

    /// The keys a clip span may have: it plays a recording, so no speech attribute applies.
    static let clipSpanKeys: [String] = ["clip", "pauseAfter", "mark"]

    private static func decodeWire(from decoder: any Decoder) throws(SpeechInputError) -> Utterance {
        let container: KeyedDecodingContainer<WireKey>
        do {
            container = try decoder.container(keyedBy: WireKey.self)
        } catch {
            throw .malformed(field: nil, "expected a JSON object with 'text', 'spans', 'ssml' or 'sequence'")
        }
        let top = WireReader(container: container, prefix: "")
        guard top.isPresent("sequence") else {
            if top.isPresent("sequenceGap") {
                throw .malformed(field: "sequenceGap", "is the gap between a sequence's parts; give it with 'sequence'")
            }
            return try decodeBody(container, prefix: "")
        }
        if let other = ["text", "spans", "ssml"].first(where: { top.isPresent($0) }) {
            throw .malformed(
                field: other, "'sequence' and '\(other)' cannot be given together: a sequence's parts carry the text")
        }
        if let boundary = Boundary.allCases.map(\.wireKey).first(where: { top.isPresent($0) }) {
            throw .malformed(
                field: boundary, "a sequence's parts start paragraphs of their own; give '\(boundary)' in a part's SSML"
            )
        }
        var utterance = try decodeSequence(container, gap: try top.double("sequenceGap") ?? Self.defaultSequenceGap)
        utterance.defaults = try attributes(from: top, includingIPA: false)
        do {
            try utterance.validate()
        } catch {
            throw utterance.namingInWire(error)
        }
        return utterance
    }

    /// The silence between a sequence's parts when `sequenceGap` does not say.
    public static let defaultSequenceGap = 0.6

    /// The keys a sequence's part may have.
    static let partKeys: [String] = [
        "text", "spans", "ssml", "language", "pitch", "rate", "volume", "punctuation", "spellOut", "voice",
    ]

    /// `sequence`: one message in several languages, spoken part after part with `gap` seconds
    /// between them, as one utterance. Each part is decoded as a body of its own (`text`,
    /// `spans` or `ssml` with its own `language`, `voice` and the other defaults, which its spans
    /// inherit), starts a paragraph, and ends with the gap (added to a pause it asked for).
    private static func decodeSequence(
        _ container: KeyedDecodingContainer<WireKey>, gap: Double
    ) throws(SpeechInputError) -> Utterance {
        guard gap.isFinite, Span.pauseAfterRange.contains(gap) else {
            throw .outOfRange(field: "sequenceGap", value: gap, range: Span.pauseAfterRange)
        }
        var list: any UnkeyedDecodingContainer
        do {
            list = try container.nestedUnkeyedContainer(forKey: "sequence")
        } catch {
            throw .malformed(
                field: "sequence", "expected an array of parts, such as [{\"language\": \"en\", \"text\": …}]")
        }
        var spans: [Span] = []
        var boundaries: [Int: Boundary] = [:]
        var origins = SequenceOrigins()
        var offset = 0
        var index = 0
        // Whether the last part with text ended in text rather than in a clip.
        var lastTextPartEndsInText = false
        while !list.isAtEnd {
            let field = "sequence[\(index)]"
            let partContainer = try nextObject(
                of: &list, at: field, expected: "an object with 'text', 'spans' or 'ssml'", named: "a part",
                keys: partKeys)
            let part = try decodeBody(partContainer, prefix: "\(field).")
            let partReader = WireReader(container: partContainer, prefix: "\(field).")
            let form = ["text", "spans", "ssml"].first { partReader.isPresent($0) } ?? "text"
            let hasText = part.spans.contains { $0.clip == nil && !$0.text.isEmpty }
            if index > 0 {
                // Apart from the last part with text: a space after its text, unless it ended
                // with a clip (a clip has no text: the next part's speech is apart from it
                // already), and a paragraph for the engine. A part of clips alone has no text to
                // set apart, and no paragraph may start after the text's end.
                if hasText {
                    if lastTextPartEndsInText,
                        let last = spans.lastIndex(where: { $0.clip == nil && !$0.text.isEmpty })
                    {
                        spans[last].text += " "
                        offset += 1
                    }
                    if offset > 0 { boundaries[offset] = .paragraph }
                }
                spans[spans.count - 1].pauseAfter = (spans[spans.count - 1].pauseAfter ?? 0) + gap
            }
            for (start, kind) in part.boundaries { boundaries[offset + start] = kind }
            // What the part's own keys set (an SSML document's language is named by `ssml`).
            let partDefaults = SequenceOrigins.keys(of: part.defaults).filter { partReader.isPresent($0) }
            for (position, span) in part.spans.enumerated() {
                var span = span
                origins.origins.append(
                    .init(
                        part: index, span: position, form: form, ownKeys: SequenceOrigins.keys(of: span.attributes),
                        partKeys: span.clip == nil ? partDefaults : []))
                // A clip is a recording: the part's language and voice are not its.
                if span.clip == nil { span.attributes = span.attributes.inheriting(from: part.defaults) }
                spans.append(span)
                offset += span.text.count
            }
            if hasText {
                lastTextPartEndsInText = part.spans.last { $0.clip != nil || !$0.text.isEmpty }?.clip == nil
            }
            index += 1
        }
        guard !spans.isEmpty else { throw .malformed(field: "sequence", "must contain at least one part") }
        for (index, span) in spans.enumerated()
        where span.pauseAfter.map({ !Span.pauseAfterRange.contains($0) }) ?? false {
            throw .outOfRange(
                field: "sequenceGap",
                "the gap and the pause of span \(index) make \(span.pauseAfter ?? 0) s, over \(Span.pauseAfterRange.upperBound) s"
            )
        }
        var utterance = Utterance(spans: spans, boundaries: boundaries)
        utterance.sequenceOrigins = origins
        return utterance
    }

    /// One body: `text`, `spans` or `ssml` with the utterance's defaults and boundaries, its fields
    /// named under `prefix` (`sequence[1].`, or nothing at the top level).
    private static func decodeBody(
        _ container: KeyedDecodingContainer<WireKey>, prefix: String
    ) throws(SpeechInputError) -> Utterance {
        let top = WireReader(container: container, prefix: prefix)
        let given = ["text", "spans", "ssml"].filter { top.isPresent($0) }
        guard given.count == 1 else {
            guard given.count > 1 else {
                throw .malformed(
                    field: prefix + "text",
                    prefix.isEmpty
                        ? "one of 'text', 'spans', 'ssml' or 'sequence' is required"
                        : "one of 'text', 'spans' or 'ssml' is required")
            }
            throw .malformed(
                field: prefix + given[1],
                "'\(given[0])' and '\(given[1])' cannot be given together; give exactly one of 'text', 'spans' or 'ssml'"
            )
        }

        var utterance: Utterance
        switch given[0] {
        case "text":
            let text = try top.string("text") ?? ""
            guard hasSpeech(text) else {
                throw .malformed(field: prefix + "text", "there is no text to speak")
            }
            utterance = Utterance(text)
        case "spans":
            utterance = Utterance(spans: try decodeSpans(from: container, prefix: prefix))
        default:
            utterance = try Utterance(ssml: try top.string("ssml") ?? "")
        }

        let ssmlLanguage = utterance.defaults.language
        utterance.defaults = try attributes(from: top, includingIPA: false)
        if let ssmlLanguage { utterance.defaults.language = ssmlLanguage }
        for kind in Boundary.allCases {
            for offset in try top.offsets(kind.wireKey) ?? [] {
                utterance.boundaries[offset] = utterance.boundaries[offset].map { .stronger($0, kind) } ?? kind
            }
        }
        do {
            try utterance.validate()
        } catch {
            throw error.prefixingField(prefix)
        }
        return utterance
    }

    /// The next element of `list`, at `field` (`spans[2]`), as an object with no key outside
    /// `keys`; the refusals say it is `expected` and name the element as `what` (`a span`).
    private static func nextObject(
        of list: inout any UnkeyedDecodingContainer, at field: String, expected: String, named what: String,
        keys: [String]
    ) throws(SpeechInputError) -> KeyedDecodingContainer<WireKey> {
        let object: KeyedDecodingContainer<WireKey>
        do {
            object = try list.nestedContainer(keyedBy: WireKey.self)
        } catch {
            throw .malformed(field: field, "expected \(expected)")
        }
        let unknown = object.allKeys.map(\.stringValue).filter { !keys.contains($0) }.sorted()
        if let key = unknown.first {
            throw .malformed(
                field: StrictJSON.memberPath(field, key),
                "unknown key '\(key)' in \(what); \(what) has \(keys.joined(separator: ", "))")
        }
        return object
    }

    private static func decodeSpans(
        from container: KeyedDecodingContainer<WireKey>, prefix: String
    ) throws(SpeechInputError) -> [Span] {
        var list: any UnkeyedDecodingContainer
        do {
            list = try container.nestedUnkeyedContainer(forKey: "spans")
        } catch {
            throw .malformed(field: prefix + "spans", "expected an array of spans")
        }
        var spans: [Span] = []
        while !list.isAtEnd {
            let field = "\(prefix)spans[\(spans.count)]"
            let spanContainer = try nextObject(
                of: &list, at: field, expected: "an object with 'text'", named: "a span", keys: spanKeys)
            let reader = WireReader(container: spanContainer, prefix: "\(field).")
            if let clip = try reader.string("clip") {
                spans.append(try clipSpan(clip, keys: spanContainer.allKeys.map(\.stringValue), reader: reader))
                continue
            }
            guard let text = try reader.string("text") else {
                throw .malformed(field: "\(field).text", "a span needs 'text'")
            }
            let pauseAfter = try reader.double("pauseAfter")
            let mark = try reader.string("mark")
            guard !text.isEmpty || pauseAfter != nil || mark != nil else {
                throw .malformed(
                    field: "\(field).text", "must not be empty (only a span with a pauseAfter or a mark may be)")
            }
            spans.append(
                Span(
                    text, attributes: try attributes(from: reader, includingIPA: true), pauseAfter: pauseAfter,
                    mark: mark))
        }
        guard !spans.isEmpty else { throw .malformed(field: prefix + "spans", "must contain at least one span") }
        guard spans.contains(where: { hasSpeech($0.text) || $0.clip != nil }) else {
            throw .malformed(field: prefix + "spans", "there is no text to speak and no clip to play")
        }
        return spans
    }

    /// A `{"clip": "NAME"}` span: its name checked, and any key a clip cannot honour refused.
    private static func clipSpan(_ clip: String, keys: [String], reader: WireReader) throws(SpeechInputError) -> Span {
        if let key = keys.filter({ !clipSpanKeys.contains($0) && reader.isPresent($0) }).sorted().first {
            throw .malformed(
                field: reader.field(key),
                "a clip span plays a recording and takes no '\(key)'; it has \(clipSpanKeys.joined(separator: ", "))")
        }
        guard Span.isValidClipName(clip) else {
            throw .malformed(
                field: reader.field("clip"),
                "'\(clip)' is not a clip name (1 to 128 letters, digits, '.', '-', '_', starting with a letter or digit)"
            )
        }
        return .clip(clip, pauseAfter: try reader.double("pauseAfter"), mark: try reader.string("mark"))
    }

    private static func attributes(
        from reader: WireReader, includingIPA: Bool
    ) throws(SpeechInputError) -> SpeechAttributes {
        var attributes = SpeechAttributes(
            pitch: try reader.double("pitch"),
            rate: try reader.double("rate"),
            volume: try reader.double("volume"),
            punctuation: try reader.bool("punctuation"),
            spellOut: try reader.bool("spellOut"))
        if let language = try reader.string("language") {
            attributes.language = try LanguageTag(language, field: reader.field("language"))
        }
        if let voice = try reader.string("voice") {
            guard voice.contains(where: { !$0.isWhitespace }) else {
                throw .malformed(field: reader.field("voice"), "must not be empty")
            }
            attributes.voice = voice
        }
        if includingIPA, let ipa = try reader.string("ipa") {
            guard ipa.contains(where: { !$0.isWhitespace }) else {
                throw .malformed(field: reader.field("ipa"), "must not be empty")
            }
            attributes.ipa = ipa
        }
        return attributes
    }

    private static func encode(
        _ attributes: SpeechAttributes, includingIPA: Bool, to container: inout KeyedEncodingContainer<WireKey>
    ) throws {
        try container.encodeIfPresent(attributes.language?.canonical, forKey: "language")
        try container.encodeIfPresent(attributes.pitch, forKey: "pitch")
        try container.encodeIfPresent(attributes.rate, forKey: "rate")
        try container.encodeIfPresent(attributes.volume, forKey: "volume")
        try container.encodeIfPresent(attributes.punctuation, forKey: "punctuation")
        try container.encodeIfPresent(attributes.spellOut, forKey: "spellOut")
        try container.encodeIfPresent(attributes.voice, forKey: "voice")
        if includingIPA { try container.encodeIfPresent(attributes.ipa, forKey: "ipa") }
    }
}

extension StrictJSON {
    /// Checks `json` strictly, then decodes it; every error is a `SpeechInputError` naming the
    /// field in wire terms, or no field for JSON that does not parse at all.
    public static func decode<Value: Decodable>(_ type: Value.Type, from json: Data) throws(SpeechInputError) -> Value {
        do {
            try check(json)
        } catch {
            if error.isOutOfRange, let field = error.field { throw .outOfRange(field: field, error.message) }
            throw .malformed(field: error.field, error.message)
        }
        do {
            return try JSONDecoder().decode(type, from: json)
        } catch let error as SpeechInputError {
            throw error
        } catch let error as DecodingError {
            throw SpeechInputError.from(error)
        } catch {
            throw .malformed(field: nil, "the body cannot be decoded: \(error)")
        }
    }
}

/// A coding key for any string, so unknown keys can be listed and named.
struct WireKey: CodingKey, ExpressibleByStringLiteral {
    let stringValue: String
    var intValue: Int? { nil }

    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
    init(stringLiteral value: String) { stringValue = value }
}

/// Reads optional values from one JSON object, turning decoding errors into `SpeechInputError`s
/// that name the field.
private struct WireReader {
    let container: KeyedDecodingContainer<WireKey>
    /// `""` at the top level, `spans[2].` inside a span.
    let prefix: String

    func field(_ key: String) -> String { prefix + key }

    func isPresent(_ key: String) -> Bool {
        let key = WireKey(stringValue: key)
        return container.contains(key) && (try? container.decodeNil(forKey: key)) == false
    }

    func string(_ key: String) throws(SpeechInputError) -> String? {
        try value(String.self, key, expected: "a string")
    }

    func double(_ key: String) throws(SpeechInputError) -> Double? {
        try value(Double.self, key, expected: "a number")
    }

    func bool(_ key: String) throws(SpeechInputError) -> Bool? {
        try value(Bool.self, key, expected: "true or false")
    }

    func offsets(_ key: String) throws(SpeechInputError) -> [Int]? {
        try value([Int].self, key, expected: "an array of character offsets")
    }

    private func value<T: Decodable>(_ type: T.Type, _ key: String, expected: String) throws(SpeechInputError) -> T? {
        do {
            return try container.decodeIfPresent(T.self, forKey: WireKey(stringValue: key))
        } catch {
            throw .malformed(field: field(key), "expected \(expected)")
        }
    }
}

extension SpeechInputError {
    /// A `DecodingError` as a `SpeechInputError` naming the field in wire terms
    /// (`spans[2].pitch`); JSON that does not parse at all names no field.
    public static func from(_ error: DecodingError) -> SpeechInputError {
        func path(_ codingPath: [any CodingKey]) -> String? {
            var path = ""
            for key in codingPath {
                if let index = key.intValue {
                    path += "[\(index)]"
                } else {
                    path += path.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return path.isEmpty ? nil : path
        }
        func describe(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Bool.Type: "true or false"
            case is Double.Type, is Float.Type, is Int.Type: "a number"
            case is [Any].Type: "an array"
            case is [String: Any].Type: "an object"
            default: "\(type)"
            }
        }
        switch error {
        case .typeMismatch(let type, let context):
            return .malformed(field: path(context.codingPath), "expected \(describe(type))")
        case .valueNotFound(let type, let context):
            return .malformed(field: path(context.codingPath), "expected \(describe(type)), found null")
        case .keyNotFound(let key, let context):
            return .malformed(field: path(context.codingPath + [key]), "is required")
        case .dataCorrupted(let context):
            guard let field = path(context.codingPath) else {
                return .malformed(field: nil, "the body is not valid JSON: \(context.debugDescription)")
            }
            return .malformed(field: field, context.debugDescription)
        @unknown default:
            return .malformed(field: nil, "\(error)")
        }
    }
}
