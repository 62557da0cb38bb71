import SpeakTestSupport
import SpeechModel
import Testing

@testable import EspeakEngine

extension EspeakEngineTests {
    @Test func markupInUserTextIsSpokenNotObeyed() async throws {
        let engine = try await Engines.engine()
        let text = #"Wait <break time="5s"/> here <audio src="x"/> please."#
        let markup = try engine.espeakMarkup(for: Utterance(text))
        #expect(markup.contains("&lt;break time=&quot;5s&quot;/&gt;"))
        #expect(markup.contains("&lt;audio src=&quot;x&quot;/&gt;"))
        let rendering = try await engine.renderAll(Utterance(text))
        // Obeyed, the break would be five seconds of silence; spoken, it is a few words.
        #expect(rendering.audio.longestInnerSilence() < 1)
        let withoutMarkup = try await engine.renderAll(Utterance("Wait here please."))
        #expect(rendering.audio.soundingDuration() > withoutMarkup.audio.soundingDuration() + 1)
    }

    @Test func entitiesInUserTextStayLiteral() async throws {
        let engine = try await Engines.engine()
        let markup = try engine.espeakMarkup(for: Utterance("Fish &amp; chips & 'peas' \"now\""))
        #expect(markup.contains("Fish &amp;amp; chips &amp; &apos;peas&apos; &quot;now&quot;"))
        let rendering = try await engine.renderAll(Utterance("Fish &amp; chips"))
        let plain = try await engine.renderAll(Utterance("Fish and chips"))
        // "and amp" is spoken: longer than the decoded "&" would be.
        #expect(rendering.audio.soundingDuration() > plain.audio.soundingDuration() + 0.15)
    }

    @Test func embeddedCommandsCannotBeInjected() async throws {
        let engine = try await Engines.engine()
        let injected = try await engine.renderAll(Utterance("\u{01}90P The next train departs from platform four."))
        let literal = try await engine.renderAll(Utterance(" 90P The next train departs from platform four."))
        let obeyed = try await engine.renderAll(
            Utterance("90P The next train departs from platform four.", defaults: SpeechAttributes(pitch: 1.5)))
        let injectedF0 = try #require(injected.audio.medianF0())
        let literalF0 = try #require(literal.audio.medianF0())
        let obeyedF0 = try #require(obeyed.audio.medianF0())
        #expect(abs(injectedF0 / literalF0 - 1) < 0.03, "\(injectedF0) Hz vs \(literalF0) Hz")
        #expect(obeyedF0 / literalF0 > 1.3)
        #expect(abs(injected.audio.soundingDuration() - literal.audio.soundingDuration()) < 0.05)
        let markup = try engine.espeakMarkup(for: Utterance("a\u{01}b\u{1B}c\u{7F}d\u{85}e"))
        #expect(!markup.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }

    @Test func phonemeInputCannotBeInjected() async throws {
        let engine = try await Engines.engine()
        let injected = try await engine.renderAll(Utterance("[[h@l'oU]]"))
        let phonemes = try await engine.renderAll(Utterance(spans: [Span("hello", attributes: SpeechAttributes(ipa: "həˈloʊ"))]))
        // Obeyed, it would be the two syllables of "hello"; spoken, it is a string of symbols.
        #expect(injected.audio.soundingDuration() > 1.5 * phonemes.audio.soundingDuration())
        #expect(try !engine.espeakMarkup(for: Utterance("a[[b]]c [ [x")).contains("[["))
        // A span ending in "[" next to one starting with "[" does not open phonemes either.
        #expect(try !engine.espeakMarkup(for: Utterance(spans: [Span("a["), Span("[b")])).contains("[["))
    }

    @Test func escapeKeepsTextAndNeutralisesMarkup() {
        #expect(EspeakInput.escape("Olá, São Paulo! 7 > 5 & 2 < 3") == "Olá, São Paulo! 7 &gt; 5 &amp; 2 &lt; 3")
        #expect(EspeakInput.escape("line\nnext\ttab") == "line\nnext\ttab")
        #expect(EspeakInput.escape("\u{01}50P") == " 50P")
        #expect(EspeakInput.escape("[[x]]") == "[ [ x]]")
    }
}
