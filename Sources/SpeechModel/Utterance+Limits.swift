extension Span {
    /// The pause a span may carry after its text, in seconds.
    public static let pauseAfterRange: ClosedRange<Double> = 0.0...10.0
}

extension Utterance {
    /// Size limits a service applies to what it accepts; both are checked by `validate(limits:)`.
    public struct Limits: Sendable, Hashable {
        /// The most characters (`Character`s, as a person counts them) in the plain text.
        public var maxTextLength: Int
        /// The most spans.
        public var maxSpans: Int

        /// Limits for a kiosk announcement: 32,767 characters (what the Web Speech API allows an
        /// utterance, and so what a browser may send through SSIP; a screen reader sends whole
        /// paragraphs), 100 spans. The daemon's defaults (`max-text-length`, `max-spans`) and
        /// `speak`'s own check are these, so an utterance `speak` accepts is not refused by a
        /// daemon left at its defaults. A long text is rendered as it is heard, a few seconds
        /// ahead of the listener, so its length costs no memory.
        public static let `default` = Limits(maxTextLength: 32_767, maxSpans: 100)

        public init(maxTextLength: Int, maxSpans: Int) {
            self.maxTextLength = maxTextLength
            self.maxSpans = maxSpans
        }
    }

    /// Checks ranges (`validate()`), that there is something to speak, and `limits`; the error
    /// names the field: `text` or `spans` (`tooLarge`, `malformed`), `spans[2].pitch` (`outOfRange`).
    public func validate(limits: Limits) throws(SpeechInputError) {
        try validate()
        guard spans.count <= limits.maxSpans else {
            throw .tooLarge(field: "spans", "\(spans.count) spans is more than the limit of \(limits.maxSpans)")
        }
        let length = spans.reduce(0) { $0 + $1.text.count }
        guard length <= limits.maxTextLength else {
            throw .tooLarge(
                field: spans.count == 1 ? "text" : "spans",
                "\(length) characters of text is more than the limit of \(limits.maxTextLength)")
        }
        guard spans.contains(where: { Self.hasSpeech($0.text) || $0.clip != nil }) else {
            throw .malformed(field: spans.count == 1 ? "text" : "spans", "there is no text to speak")
        }
    }

    /// Whether `text` has anything to speak: a character that is not whitespace, a control or
    /// format character (`U+0001`, `U+200B`, `U+FEFF`) or otherwise invisible (a variation
    /// selector alone). The engine turns control characters into spaces, so text made only of
    /// them is accepted and silent unless it is refused here.
    public static func hasSpeech<S: StringProtocol>(_ text: S) -> Bool {
        text.unicodeScalars.contains { scalar in
            let properties = scalar.properties
            return !properties.isWhitespace && !properties.isDefaultIgnorableCodePoint
                && properties.generalCategory != .control && properties.generalCategory != .format
        }
    }
}
