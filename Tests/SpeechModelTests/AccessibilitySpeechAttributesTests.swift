import Foundation
import Testing

@testable import SpeechModel

@Suite struct AccessibilitySpeechAttributesTests {
    static func tag(_ string: String) -> LanguageTag { try! LanguageTag(string) }

    @Test func appleNamesWorkThroughDynamicLookup() throws {
        var string = AttributedString("Next train to Lisboa")
        string.accessibilitySpeechPitch = 1.2
        string.accessibilitySpeechIncludesPunctuation = false
        let range = try #require(string.range(of: "Lisboa"))
        string[range].accessibilitySpeechLanguage = "pt-PT"
        string[range].accessibilitySpeechPhoneticNotation = "liʒˈβoɐ"
        string[range].speechRate = 0.8
        string[range].speechVolume = 0.5
        string[range].accessibilitySpeechSpellsOutCharacters = true
        string[range].speechPauseAfter = 0.4

        #expect(string.runs.count == 2)
        let last = try #require(string.runs.last)
        #expect(last.accessibilitySpeechPitch == 1.2)
        #expect(last.accessibilitySpeechLanguage == "pt-PT")
        #expect(last.speechRate == 0.8)
        #expect(string.runs.first?.accessibilitySpeechLanguage == nil)
        #expect(
            AttributeScopes.AccessibilitySpeechAttributes.AccessibilitySpeechPitchAttribute.name
                == "accessibilitySpeechPitch")
    }

    @Test func attributedStringBecomesSpans() throws {
        var string = AttributedString("Next train to ")
        var name = AttributedString("Lisboa")
        name.accessibilitySpeechLanguage = "PT-pt"
        name.accessibilitySpeechPitch = 1.2
        name.speechPauseAfter = 0.5
        string.append(name)
        string.append(AttributedString(", platform "))
        var platform = AttributedString("7")
        platform.accessibilitySpeechSpellsOutCharacters = true
        string.append(platform)

        let defaults = SpeechAttributes(language: Self.tag("en-GB"))
        let utterance = try Utterance(string, defaults: defaults)
        #expect(
            utterance
                == Utterance(
                    spans: [
                        Span("Next train to "),
                        Span(
                            "Lisboa", attributes: SpeechAttributes(pitch: 1.2, language: Self.tag("pt-PT")),
                            pauseAfter: 0.5),
                        Span(", platform "),
                        Span("7", attributes: SpeechAttributes(spellOut: true)),
                    ], defaults: defaults))
    }

    @Test func runsDifferingOnlyInOtherAttributesMerge() throws {
        var string = AttributedString("Hello ")
        string.accessibilitySpeechPitch = 0.9
        var world = AttributedString("world")
        world.accessibilitySpeechPitch = 0.9
        world.link = URL(string: "https://example.invalid")
        string.append(world)
        #expect(string.runs.count == 2)
        let utterance = try Utterance(string)
        #expect(utterance.spans == [Span("Hello world", attributes: SpeechAttributes(pitch: 0.9))])
    }

    @Test func tagsDifferingOnlyInCaseMerge() throws {
        var string = AttributedString("ab")
        string[string.startIndex..<string.index(afterCharacter: string.startIndex)].accessibilitySpeechLanguage =
            "en-us"
        string[string.index(afterCharacter: string.startIndex)...].accessibilitySpeechLanguage = "EN-US"
        #expect(string.runs.count == 2)
        #expect(try Utterance(string).spans == [Span("ab", attributes: SpeechAttributes(language: Self.tag("en-US")))])
    }

    @Test func malformedLanguageNamesTheSpan() {
        var string = AttributedString("one ")
        var two = AttributedString("two ")
        two.accessibilitySpeechPitch = 1.5
        var three = AttributedString("three")
        three.accessibilitySpeechLanguage = "en_GB"
        string.append(two)
        string.append(three)
        let error = #expect(throws: SpeechInputError.self) { try Utterance(string) }
        #expect(error?.field == "spans[2].language")
        #expect(error?.kind == "malformed")
        #expect(error?.message.hasPrefix("'en_GB' is not a well-formed BCP 47 tag") == true)
    }

    @Test func utteranceRoundTripsThroughAttributedString() throws {
        let utterance = Utterance(
            spans: [
                Span(
                    "Mind the gap ", attributes: SpeechAttributes(pitch: 0.8, rate: 1.5, volume: 0.7, punctuation: true)
                ),
                Span(
                    "Lisboa", attributes: SpeechAttributes(language: Self.tag("pt-PT"), spellOut: true, ipa: "liʒˈβoɐ"),
                    pauseAfter: 1),
                Span(" end"),
            ], defaults: SpeechAttributes(pitch: 1.1, language: Self.tag("en-GB")))
        let attributed = AttributedString(utterance)
        #expect(String(attributed.characters) == utterance.text)
        #expect(attributed.runs.count == 3)
        #expect(try Utterance(attributed, defaults: utterance.defaults) == utterance)
    }

    @Test func resolvingDefaultsWritesInheritedValues() throws {
        let utterance = Utterance(
            spans: [Span("a "), Span("b", attributes: SpeechAttributes(pitch: 1.5))],
            defaults: SpeechAttributes(pitch: 1.1, language: Self.tag("de")))
        let attributed = AttributedString(utterance, resolvingDefaults: true)
        #expect(attributed.runs.map(\.accessibilitySpeechPitch) == [1.1, 1.5])
        #expect(attributed.runs.map(\.accessibilitySpeechLanguage) == ["de", "de"])
        #expect(AttributedString(utterance).runs.first?.accessibilitySpeechPitch == nil)
    }

    @Test func emptyAttributedStringHasNoSpans() throws {
        #expect(try Utterance(AttributedString()).spans.isEmpty)
    }
}
