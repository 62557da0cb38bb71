/// A run of text with the attributes that apply to it alone.
public struct Span: Sendable, Hashable {
    public var text: String
    public var attributes: SpeechAttributes
    /// Silence after the span, in seconds (SSML `break`).
    public var pauseAfter: Double?
    /// A mark reached as the span starts being heard (reported as a `mark` event); an XML NMTOKEN.
    public var mark: String?

    public init(
        _ text: String, attributes: SpeechAttributes = SpeechAttributes(), pauseAfter: Double? = nil,
        mark: String? = nil
    ) {
        self.text = text
        self.attributes = attributes
        self.pauseAfter = pauseAfter
        self.mark = mark
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

    /// Each span with its attributes after inheriting the utterance defaults.
    public var resolvedSpans: [Span] {
        spans.map {
            Span(
                $0.text, attributes: $0.attributes.inheriting(from: defaults), pauseAfter: $0.pauseAfter, mark: $0.mark)
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
