/// A run of text with the attributes that apply to it alone.
public struct Span: Sendable, Hashable {
    public var text: String
    public var attributes: SpeechAttributes
    /// Silence after the span, in seconds (SSML `break`).
    public var pauseAfter: Double?
    /// A mark reached as the span starts being heard (reported as a `mark` event); an XML NMTOKEN.
    public var mark: String?
    /// The recorded clip played in place of speech (`{"clip": "NAME"}`, SSML
    /// `<audio src="clip:NAME"/>`); a clip span has no text and no speech attributes.
    public var clip: String?

    public init(
        _ text: String, attributes: SpeechAttributes = SpeechAttributes(), pauseAfter: Double? = nil,
        mark: String? = nil, clip: String? = nil
    ) {
        self.text = text
        self.attributes = attributes
        self.pauseAfter = pauseAfter
        self.mark = mark
        self.clip = clip
    }

    /// A span that plays the clip `name`.
    public static func clip(_ name: String, pauseAfter: Double? = nil, mark: String? = nil) -> Span {
        Span("", pauseAfter: pauseAfter, mark: mark, clip: name)
    }

    /// Whether `name` can name a clip: 1 to 128 letters, digits, `.`, `-` and `_`, starting with a
    /// letter or digit. It is a file name in the clip directory without its extension, so
    /// nothing that leaves the directory (`/`, `..`) or hides a file (a leading `.`) passes.
    public static func isValidClipName(_ name: String) -> Bool {
        func isAlphanumeric(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
        }
        guard let first = name.unicodeScalars.first, isAlphanumeric(first), name.unicodeScalars.count <= 128 else {
            return false
        }
        return !name.contains("..")
            && name.unicodeScalars.allSatisfy { isAlphanumeric($0) || "._-".unicodeScalars.contains($0) }
    }

    /// Whether `name` is an XML NMTOKEN (letters, digits, `.`, `-`, `_`, `:`), as a mark's name must be.
    public static func isValidMark(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 256
            && name.unicodeScalars.allSatisfy { scalar in
                scalar.properties.isAlphabetic || scalar.properties.numericType != nil
                    || ".-_:".unicodeScalars.contains(scalar)
            }
    }
}

/// Text plus spans of speech attributes, with utterance-wide defaults.
///
/// Spans apply to their own text only; attributes a span does not set inherit `defaults`.
public struct Utterance: Sendable, Hashable {
    /// How markup sets a sentence apart from the text before it.
    public enum Boundary: String, Sendable, Hashable, CaseIterable {
        /// A new sentence (SSML `s`).
        case sentence
        /// A new paragraph (SSML `p`), which starts a new sentence too.
        case paragraph
    }

    public var spans: [Span]
    public var defaults: SpeechAttributes
    /// Where markup (SSML `s`, `p`) starts a new sentence or paragraph, keyed by the offset in
    /// characters of the spans' text, counted span by span, at which it starts. The text before
    /// a boundary need not end with punctuation: the boundary ends its sentence all the same.
    public var boundaries: [Int: Boundary]
    /// Where each span came from when the utterance was decoded from a `sequence`; empty
    /// otherwise. Not part of its equality.
    public var sequenceOrigins = SequenceOrigins()

    public init(spans: [Span], defaults: SpeechAttributes = SpeechAttributes(), boundaries: [Int: Boundary] = [:]) {
        self.spans = spans
        self.defaults = defaults
        self.boundaries = boundaries
    }

    /// A plain-text utterance.
    public init(_ text: String, defaults: SpeechAttributes = SpeechAttributes()) {
        self.init(spans: [Span(text)], defaults: defaults)
    }

    /// The plain string, as UIAccessibilityAnnouncementKeyStringValue carries it.
    public var text: String { spans.map(\.text).joined() }

    /// The spans `range` as an utterance of their own, rendered apart from the rest: the same
    /// defaults, and the boundaries inside it counted from its own start. A part's error names
    /// its spans from 0: `SpeechInputError.reindexed(spansFrom:)` names them in the whole.
    public func part(spans range: Range<Int>) -> Utterance {
        let start = spans[..<range.lowerBound].reduce(0) { $0 + $1.text.count }
        let end = start + spans[range].reduce(0) { $0 + $1.text.count }
        return Utterance(
            spans: Array(spans[range]), defaults: defaults,
            boundaries: boundaries.filter { $0.key > start && $0.key < end }
                .reduce(into: [:]) { $0[$1.key - start] = $1.value })
    }

    /// Whether any span plays a recorded clip.
    public var hasClips: Bool { spans.contains { $0.clip != nil } }

    /// Refuses a clip span, naming it (`spans[2].clip`): for an engine, which speaks text only.
    /// Clips are played by the renderer in front of the engines (speakd's clip library), which
    /// never passes one on; an utterance that reaches an engine with one would lose it silently.
    public func checkHasNoClips() throws(SpeechInputError) {
        if let index = spans.firstIndex(where: { $0.clip != nil }) {
            throw .unsupported(
                field: "spans[\(index)].clip",
                "clips are played by speakd from its clip library (--clips), not by an engine")
        }
    }

    /// Each span with its attributes after inheriting the utterance defaults.
    public var resolvedSpans: [Span] {
        spans.map {
            Span(
                $0.text, attributes: $0.attributes.inheriting(from: defaults), pauseAfter: $0.pauseAfter, mark: $0.mark,
                clip: $0.clip)
        }
    }

    /// Checks the defaults, every span and the boundaries; the error names the field
    /// (`spans[2].pitch`, `paragraphStarts`).
    public func validate() throws(SpeechInputError) {
        do {
            try defaults.validate()
        }
        for (index, span) in spans.enumerated() {
            do {
                try span.attributes.validate()
            } catch {
                throw error.nested(in: "spans[\(index)]")
            }
            if let pause = span.pauseAfter, !(pause.isFinite && Span.pauseAfterRange.contains(pause)) {
                throw .outOfRange(field: "spans[\(index)].pauseAfter", value: pause, range: Span.pauseAfterRange)
            }
            if let clip = span.clip {
                guard Span.isValidClipName(clip) else {
                    throw .malformed(
                        field: "spans[\(index)].clip",
                        "'\(clip)' is not a clip name (1 to 128 letters, digits, '.', '-', '_', starting with a letter or digit)"
                    )
                }
                guard span.text.isEmpty, span.attributes == SpeechAttributes() else {
                    throw .malformed(field: "spans[\(index)].clip", "a clip span has no text and no speech attributes")
                }
            }
            if let mark = span.mark, !Span.isValidMark(mark) {
                throw .malformed(
                    field: "spans[\(index)].mark",
                    "'\(mark)' is not a mark name (letters, digits, '.', '-', '_', ':')")
            }
        }
        // A boundary before the first character or after the last one separates nothing.
        let length = spans.reduce(0) { $0 + $1.text.count }
        for (offset, boundary) in boundaries.sorted(by: { $0.key < $1.key }) where offset < 1 || offset >= length {
            throw .outOfRange(
                field: boundary.wireKey,
                "\(offset) is not a character offset inside the text (1–\(max(1, length - 1)))")
        }
    }
}

extension Utterance.Boundary {
    /// The top-level wire key that lists where boundaries of this kind start.
    public var wireKey: String {
        switch self {
        case .sentence: "sentenceStarts"
        case .paragraph: "paragraphStarts"
        }
    }

    /// The stronger of two boundaries at one offset: a paragraph also starts a sentence.
    static func stronger(_ a: Self, _ b: Self) -> Self {
        a == .paragraph || b == .paragraph ? .paragraph : .sentence
    }
}
