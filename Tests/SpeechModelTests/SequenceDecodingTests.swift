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

    /// A part of clips alone is a part like another, first, between or last: no space and no
    /// paragraph is put after the text for it, so none starts past the text's end.
    @Test(arguments: [
        (#"{"sequence": [{"text": "a"}, {"spans": [{"clip": "hello"}]}]}"#, "a", ["a", ""], [Int]()),
        (#"{"sequence": [{"spans": [{"clip": "hello"}]}, {"text": "a"}]}"#, "a", ["", "a"], []),
        (#"{"sequence": [{"spans": [{"clip": "hello"}]}]}"#, "", [""], []),
        (#"{"sequence": [{"text": "a"}, {"spans": [{"clip": "hi"}]}, {"text": "b"}]}"#, "a b", ["a ", "", "b"], [2]),
        (
            #"{"sequence": [{"text": "a"}, {"spans": [{"text": "b"}, {"clip": "hi"}]}, {"spans": [{"clip": "x"}]}]}"#,
            "a b", ["a ", "b", "", ""], [2]
        ),
    ])
    func aClipOnlyPartIsAcceptedAnywhere(_ json: String, _ text: String, _ spans: [String], _ paragraphs: [Int]) throws
    {
        let utterance = try Self.decode(json)
        #expect(utterance.text == text)
        #expect(utterance.spans.map(\.text) == spans)
        #expect(utterance.boundaries.filter { $0.value == .paragraph }.keys.sorted() == paragraphs)
        #expect(utterance.spans.first?.pauseAfter == (spans.count > 1 ? Utterance.defaultSequenceGap : nil))
    }

    /// An error found after the decoding (an engine's unknown language or voice, a clip the
    /// library has not) names the part the client wrote, not the span of the joined whole.
    @Test(arguments: [
        ("spans[1].language", "sequence[1].language"),
        ("spans[1].voice", "sequence[1].voice"),
        ("spans[2].language", "sequence[2].spans[0].language"),
        ("spans[3].ipa", "sequence[2].spans[1].ipa"),
        ("spans[3].language", "sequence[2].language"),
        ("spans[4].clip", "sequence[2].spans[2].clip"),
        ("spans[6].language", "sequence[3].ssml"),
        ("spans[0].pitch", "sequence[0].text"),
        ("language", "language"),
        ("spans[9].language", "spans[9].language"),
    ])
    func laterErrorsAreNamedInTheSequence(_ field: String, _ named: String) throws {
        let utterance = try Self.decode(
            """
            {"sequence": [
                {"text": "a"},
                {"language": "fr", "voice": "roa/fr", "text": "b"},
                {"language": "de", "spans": [{"text": "c", "language": "nl"}, {"text": "d", "ipa": "dd"}, {"clip": "x"}]},
                {"ssml": "<speak>e <voice xml:lang='pt'>f</voice></speak>"}
            ], "language": "en"}
            """)
        #expect(utterance.namingInWire(.notFound(field: field, "no voice")).field == named)
        #expect(Utterance("plain").namingInWire(.notFound(field: field, "no voice")).field == field)
    }

    /// The naming does not make two utterances that say the same differ.
    @Test func theOriginsTakeNoPartInEquality() throws {
        let sequence = try Self.decode(#"{"sequence": [{"text": "a"}]}"#)
        #expect(sequence == Utterance("a"))
        #expect(sequence.hashValue == Utterance("a").hashValue)
    }
}
