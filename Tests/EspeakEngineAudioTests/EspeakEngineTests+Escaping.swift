import SpeakTestSupport
import SpeechModel
import Testing

@testable import EspeakEngine

extension EspeakEngineTests {
    /// `text` as one plain span (espeak-ng gets plain text) or split into two spans at its first
    /// space (espeak-ng gets SSML): user text must be safe both ways.
    static func utterance(_ text: String, markup: Bool, defaults: SpeechAttributes = SpeechAttributes()) -> Utterance {
        guard markup, let space = text.firstIndex(of: " ") else { return Utterance(text, defaults: defaults) }
        return Utterance(
            spans: [Span(String(text[...space])), Span(String(text[text.index(after: space)...]))], defaults: defaults)
    }

    @Test(arguments: [false, true])
    func markupInUserTextIsSpokenNotObeyed(markup: Bool) async throws {
        let engine = try await Engines.engine()
        let text = #"Wait <break time="5s"/> here <audio src="x"/> please."#
        let input = try engine.espeakInput(for: Self.utterance(text, markup: markup))
        #expect(input.isMarkup == markup)
        if markup {
            #expect(input.text.contains("&lt;break time=&quot;5s&quot;/&gt;"))
            #expect(input.text.contains("&lt;audio src=&quot;x&quot;/&gt;"))
        }
        let rendering = try await engine.renderAll(Self.utterance(text, markup: markup))
        // Obeyed, the break would be five seconds of silence; spoken, it is a few words.
        #expect(rendering.audio.longestInnerSilence() < 1)
        let withoutMarkup = try await engine.renderAll(Utterance("Wait here please."))
        #expect(rendering.audio.soundingDuration() > withoutMarkup.audio.soundingDuration() + 1)
    }

    @Test(arguments: [false, true])
    func entitiesInUserTextStayLiteral(markup: Bool) async throws {
        let engine = try await Engines.engine()
        if markup {
            let input = try engine.espeakInput(for: Self.utterance("Fish &amp; chips & 'peas' \"now\"", markup: true))
            #expect(input.text.contains("&amp;amp; chips &amp; &apos;peas&apos; &quot;now&quot;"))
        }
        let rendering = try await engine.renderAll(Self.utterance("Fish &amp; chips", markup: markup))
        let plain = try await engine.renderAll(Self.utterance("Fish and chips", markup: markup))
        // "and amp" is spoken: longer than the decoded "&" would be.
        #expect(rendering.audio.soundingDuration() > plain.audio.soundingDuration() + 0.15)
    }

    @Test(arguments: [false, true])
    func embeddedCommandsCannotBeInjected(markup: Bool) async throws {
        let engine = try await Engines.engine()
        let text = "The next train departs from platform four."
        let injected = try await engine.renderAll(Self.utterance("\u{01}90P \(text)", markup: markup))
        let literal = try await engine.renderAll(Self.utterance(" 90P \(text)", markup: markup))
        let obeyed = try await engine.renderAll(
            Self.utterance("90P \(text)", markup: markup, defaults: SpeechAttributes(pitch: 1.5)))
        let injectedF0 = try #require(injected.audio.medianF0())
        let literalF0 = try #require(literal.audio.medianF0())
        let obeyedF0 = try #require(obeyed.audio.medianF0())
        #expect(abs(injectedF0 / literalF0 - 1) < 0.03, "\(injectedF0) Hz vs \(literalF0) Hz")
        #expect(obeyedF0 / literalF0 > 1.3)
        #expect(abs(injected.audio.soundingDuration() - literal.audio.soundingDuration()) < 0.05)
        let input = try engine.espeakInput(for: Self.utterance("a \u{01}b\u{1B}c\u{7F}d\u{85}e", markup: markup))
        #expect(!input.text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }

    @Test(arguments: [false, true])
    func phonemeInputCannotBeInjected(markup: Bool) async throws {
        let engine = try await Engines.engine()
        let injected = try await engine.renderAll(Self.utterance("say [[h@l'oU]]", markup: markup))
        let phonemes = try await engine.renderAll(
            Utterance(spans: [Span("say "), Span("hello", attributes: SpeechAttributes(ipa: "həˈloʊ"))]))
        // Obeyed, it would be "say hello"; spoken, it is a string of symbols.
        #expect(injected.audio.soundingDuration() > 1.5 * phonemes.audio.soundingDuration())
        if markup {
            #expect(try !engine.espeakInput(for: Self.utterance("a [[b]]c [ [x", markup: true)).text.contains("[["))
            // A span ending in "[" next to one starting with "[" does not open phonemes either.
            #expect(try !engine.espeakInput(for: Utterance(spans: [Span("a["), Span("[b")])).text.contains("[["))
        }
    }

    @Test func escapeKeepsTextAndNeutralisesMarkup() {
        #expect(EspeakInput.escape("Olá, São Paulo! 7 > 5 & 2 < 3") == "Olá, São Paulo! 7 &gt; 5 &amp; 2 &lt; 3")
        #expect(EspeakInput.escape("line\nnext\ttab") == "line\nnext\ttab")
        #expect(EspeakInput.escape("\u{01}50P") == " 50P")
        #expect(EspeakInput.escape("[[x]]") == "[ [ x]]")
        #expect(EspeakInput.plain("\u{01}50P <b> [[x]]\n") == " 50P <b> [[x]]\n")
    }
}
