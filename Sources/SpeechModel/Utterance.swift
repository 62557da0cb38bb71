/// A run of text with the attributes that apply to it alone.
public struct Span: Sendable, Hashable {
    public var text: String
    public var attributes: SpeechAttributes
    /// Silence after the span, in seconds (SSML `break`).
    public var pauseAfter: Double?

    public init(_ text: String, attributes: SpeechAttributes = SpeechAttributes(), pauseAfter: Double? = nil) {
        self.text = text
        self.attributes = attributes
        self.pauseAfter = pauseAfter
    }
}

/// Text plus spans of speech attributes, with utterance-wide defaults.
///
/// Spans apply to their own text only; attributes a span does not set inherit `defaults`.
public struct Utterance: Sendable, Hashable {
    public var spans: [Span]
    public var defaults: SpeechAttributes

    public init(spans: [Span], defaults: SpeechAttributes = SpeechAttributes()) {
        self.spans = spans
        self.defaults = defaults
    }

    /// A plain-text utterance.
    public init(_ text: String, defaults: SpeechAttributes = SpeechAttributes()) {
        self.init(spans: [Span(text)], defaults: defaults)
    }

    /// The plain string, as UIAccessibilityAnnouncementKeyStringValue carries it.
    public var text: String { spans.map(\.text).joined() }

    /// Each span with its attributes after inheriting the utterance defaults.
    public var resolvedSpans: [Span] {
        spans.map { Span($0.text, attributes: $0.attributes.inheriting(from: defaults), pauseAfter: $0.pauseAfter) }
    }

    /// Checks the defaults and every span; the error names the field (`spans[2].pitch`).
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
        }
    }
}
