import Foundation
import Testing

@testable import SpeechModel

/// `sequence`: one message in several languages, decoded into one utterance.
@Suite struct SequenceDecodingTests {
    static func tag(_ string: String) -> LanguageTag { try! LanguageTag(string) }

    static func decode(_ json: String) throws(SpeechInputError) -> Utterance {
        try Utterance.decode(json: Data(json.utf8))
    }

    @Test func partsBecomeSpansInTheirLanguagesWithTheGapBetween() throws {
        let utterance = try Self.decode(
            """
            { "sequence": [
                {"language": "pt-PT", "text": "O comboio parte da linha quatro."},
                {"language": "en", "voice": "gmw/en", "spans": [{"text": "The train leaves "}, {"text": "from platform four.", "pitch": 1.2}]},
                {"ssml": "<speak xml:lang='fr'>Le train part du quai quatre.</speak>"}
              ],
              "sequenceGap": 0.8, "rate": 1.1 }
            """)
        #expect(
            utterance.spans.map(\.attributes.language) == [
                Self.tag("pt-PT"), Self.tag("en"), Self.tag("en"), Self.tag("fr"),
            ])
        #expect(utterance.spans.map(\.attributes.voice) == [nil, "gmw/en", "gmw/en", nil])
        #expect(utterance.spans[2].attributes.pitch == 1.2)
        #expect(utterance.spans.map(\.pauseAfter) == [0.8, nil, 0.8, nil])
        #expect(utterance.defaults.rate == 1.1)
        #expect(
            utterance.text
                == "O comboio parte da linha quatro. The train leaves from platform four. Le train part du quai quatre."
        )
        let second = "O comboio parte da linha quatro. ".count
        let third = second + "The train leaves from platform four. ".count
        #expect(utterance.boundaries[second] == .paragraph && utterance.boundaries[third] == .paragraph)
    }

    @Test func theDefaultGap() throws {
        let utterance = try Self.decode(#"{"sequence": [{"text": "One."}, {"text": "Two."}]}"#)
        #expect(utterance.spans.first?.pauseAfter == Utterance.defaultSequenceGap)
    }

    @Test(
        arguments: [
            (#"{"sequence": []}"#, "sequence"),
            (#"{"sequence": {"text": "a"}}"#, "sequence"),
            (#"{"sequence": [{"text": "a"}], "text": "b"}"#, "text"),
            (#"{"sequence": [{"text": "a"}], "ssml": "<speak>b</speak>"}"#, "ssml"),
            (#"{"text": "a", "sequenceGap": 1}"#, "sequenceGap"),
            (#"{"sequence": [{"text": "a"}], "sequenceGap": 11}"#, "sequenceGap"),
            (#"{"sequence": [{"text": "a"}, {"language": "xx-nowhere!", "text": "b"}]}"#, "sequence[1].language"),
            (#"{"sequence": [{"text": "a"}, {"text": "b", "colour": "red"}]}"#, "sequence[1].colour"),
            (#"{"sequence": [{"language": "en"}]}"#, "sequence[0].text"),
            (#"{"sequence": [{"spans": [{"text": "a", "pitch": 9}]}]}"#, "sequence[0].spans[0].pitch"),
            (#"{"sequence": [{"text": "a"}], "paragraphStarts": [0]}"#, "paragraphStarts"),
            (#"{"sequence": [{"text": "a", "pauseAfter": 1}]}"#, "sequence[0].pauseAfter"),
        ])
    func refusedNamingTheField(_ json: String, _ field: String) {
        #expect {
            try Self.decode(json)
        } throws: { error in
            (error as? SpeechInputError)?.field == field
        }
    }
}
