import Testing

@testable import SpeechModel

@Suite struct UtteranceLimitsTests {
    let limits = Utterance.Limits(maxTextLength: 10, maxSpans: 3)

    @Test func withinLimitsPasses() throws {
        try Utterance("0123456789").validate(limits: limits)
        try Utterance(spans: [Span("abc"), Span("def"), Span("ghij")]).validate(limits: limits)
        // Characters are counted as a person counts them, not as UTF-8 bytes.
        try Utterance("Olá, ñandú").validate(limits: limits)
    }

    @Test func tooLongTextNamesTextOrSpans() {
        let plain = #expect(throws: SpeechInputError.self) { try Utterance("0123456789X").validate(limits: limits) }
        #expect(plain?.kind == "tooLarge")
        #expect(plain?.field == "text")
        #expect(plain?.message == "11 characters of text is more than the limit of 10")

        let spans = #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span("012345"), Span("67890")]).validate(limits: limits)
        }
        #expect(spans?.field == "spans")
    }

    @Test func tooManySpans() {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span("a"), Span("b"), Span("c"), Span("d")]).validate(limits: limits)
        }
        #expect(error?.kind == "tooLarge")
        #expect(error?.field == "spans")
        #expect(error?.message == "4 spans is more than the limit of 3")
    }

    @Test func nothingToSpeak() {
        let error = #expect(throws: SpeechInputError.self) { try Utterance("  \n").validate(limits: .default) }
        #expect(error?.kind == "malformed")
        #expect(error?.field == "text")
    }

    /// espeak-ng says nothing for control characters (the engine turns them into spaces).
    @Test(arguments: ["\u{01}\u{02}", "\u{07}\n\u{1B}\t", "\u{7F}\u{9F}", "\u{200B}\u{FEFF}\u{AD}"])
    func onlyControlCharactersIsNothingToSpeak(text: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(text).validate(limits: .default) }
        #expect(error?.kind == "malformed")
        #expect(error?.field == "text")
        let spans = #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span(text), Span("\u{0}")]).validate(limits: .default)
        }
        #expect(spans?.field == "spans")
        // A control character next to a word is harmless.
        #expect(throws: Never.self) { try Utterance("\u{01}Gate two").validate(limits: .default) }
    }

    @Test func rangesAreCheckedFirst() {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span("a"), Span("b", attributes: SpeechAttributes(pitch: 2.5))]).validate(
                limits: limits)
        }
        #expect(error?.kind == "outOfRange")
        #expect(error?.field == "spans[1].pitch")
    }

    @Test(arguments: [-0.1, 10.5, Double.nan, Double.infinity])
    func pausesAreRangeChecked(pause: Double) {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span("a"), Span("b", pauseAfter: pause)]).validate()
        }
        #expect(error?.kind == "outOfRange")
        #expect(error?.field == "spans[1].pauseAfter")
    }
}
