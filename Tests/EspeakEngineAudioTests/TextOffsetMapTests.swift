import EspeakEngine
import SpeechModel
import SpeechRendering
import Testing

/// The offset map `prepare` builds with espeak-ng's input: the words espeak-ng reports, mapped
/// through it, are the words of the text the client sent, wherever escaping, markup, spell-out
/// or phonemes changed the input.
@Suite struct TextOffsetMapTests {
    /// The words espeak-ng reports for `utterance`, as the text has them.
    static func words(_ utterance: Utterance) async throws -> [String] {
        let engine = try await Engines.engine()
        let prepared = try engine.prepare(utterance)
        let map = try #require(prepared.textMap)
        let text = utterance.text
        var words: [String] = []
        for try await chunk in engine.render(prepared) {
            for event in chunk.events where event.kind == .word {
                guard let range = map.range(of: event) else { continue }
                let utf16 = Array(text.utf16)
                #expect(range.lowerBound >= 0 && range.upperBound <= utf16.count)
                words.append(String(decoding: utf16[range], as: UTF16.self))
            }
        }
        return words
    }

    @Test func plainText() async throws {
        let words = try await Self.words(Utterance("Platform four. The train to Porto is late."))
        #expect(words == ["Platform", "four", "The", "train", "to", "Porto", "is", "late"])
    }

    @Test func escapedTextAndSeveralSpans() async throws {
        let utterance = Utterance(spans: [
            Span("Tom & Jerry <said> "), Span("next", attributes: SpeechAttributes(pitch: 1.3)), Span(" [[stop]] now."),
        ])
        let words = try await Self.words(utterance)
        // `[[stop]]` is text, not phonemes: espeak-ng reads its brackets as two words.
        #expect(words == ["Tom", "&", "Jerry", "said", "next", "stop", "stop", "now"])
    }

    @Test func nonASCIIAndPortuguese() async throws {
        let utterance = Utterance(spans: [
            Span("Zürich 🚆 then "), Span("Lisboa Santa Apolónia", attributes: SpeechAttributes(language: tag("pt-PT"))),
            Span(" please."),
        ])
        let words = try await Self.words(utterance)
        #expect(words == ["Zürich", "🚆", "then", "Lisboa", "Santa", "Apolónia", "please"])
    }

    @Test func spelledOut() async throws {
        let utterance = Utterance(spans: [
            Span("Code "), Span("AB12", attributes: SpeechAttributes(spellOut: true)), Span(" ends."),
        ])
        let words = try await Self.words(utterance)
        #expect(words.contains("Code") && words.contains("ends"))
        #expect(words == ["Code", "A", "B", "1", "2", "ends"])
    }

    @Test func ssmlInput() async throws {
        let utterance = try Utterance(
            ssml:
                "<speak>Gate <prosody rate=\"slow\">B</prosody> is <break time=\"200ms\"/> closing &amp; boarding.</speak>"
        )
        let words = try await Self.words(utterance)
        #expect(words == ["Gate", "B", "is", "closing", "&", "boarding"])
    }
}
