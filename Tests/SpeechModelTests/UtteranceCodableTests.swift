import Foundation
import Testing

@testable import SpeechModel

@Suite struct UtteranceCodableTests {
    static func tag(_ string: String) -> LanguageTag { try! LanguageTag(string) }

    static func decode(_ json: String) throws(SpeechInputError) -> Utterance {
        try Utterance.decode(json: Data(json.utf8))
    }

    @Test func designExampleDecodes() throws {
        let utterance = try Self.decode(
            """
            { "spans": [ {"text": "Next train to "},
                         {"text": "Lisboa Santa Apolónia", "language": "pt-pt", "pitch": 1.2} ],
              "language": "en-GB", "pitch": 1.0, "rate": 1.0, "volume": 1.0,
              "punctuation": false, "spellOut": false,
              "priority": "default", "queue": true, "expiresAfter": 30 }
            """)
        #expect(
            utterance.spans == [
                Span("Next train to "),
                Span("Lisboa Santa Apolónia", attributes: SpeechAttributes(pitch: 1.2, language: Self.tag("pt-PT"))),
            ])
        #expect(
            utterance.defaults
                == SpeechAttributes(
                    pitch: 1.0, rate: 1.0, volume: 1.0, punctuation: false, language: Self.tag("en-GB"), spellOut: false
                ))
        #expect(utterance.text == "Next train to Lisboa Santa Apolónia")
    }

    @Test func plainTextAndEveryAttribute() throws {
        #expect(try Self.decode(#"{"text": "Hello"}"#) == Utterance("Hello"))
        let utterance = try Self.decode(
            """
            {"spans": [{"text": "x", "language": "de", "pitch": 0.5, "rate": 2, "volume": 0, "punctuation": true,
                        "spellOut": true, "ipa": "ɪks", "pauseAfter": 1.5}],
             "ipa": "ignored at the top", "ssml": null}
            """)
        #expect(
            utterance.spans == [
                Span(
                    "x",
                    attributes: SpeechAttributes(
                        pitch: 0.5, rate: 2, volume: 0, punctuation: true, language: Self.tag("de"), spellOut: true,
                        ipa: "ɪks"),
                    pauseAfter: 1.5)
            ])
        #expect(utterance.defaults == SpeechAttributes())
    }

    @Test func voiceByNameAtTheTopAndOnASpanRoundTrips() throws {
        let utterance = try Self.decode(
            #"{"spans": [{"text": "Gate "}, {"text": "twelve", "voice": "other"}], "voice": "en_US-joe-medium"}"#)
        #expect(utterance.defaults.voice == "en_US-joe-medium")
        #expect(utterance.resolvedSpans.map(\.attributes.voice) == ["en_US-joe-medium", "other"])
        let encoded = try JSONEncoder().encode(utterance)
        #expect(try Utterance.decode(json: encoded) == utterance)
    }

    @Test func ssmlIsParsedAndTakesItsLanguageOverTheTopLevelOne() throws {
        let utterance = try Self.decode(
            #"""
            {"ssml": "<speak xml:lang=\"pt-BR\">Olá <prosody pitch=\"high\">mundo</prosody></speak>",
             "language": "en", "rate": 1.5}
            """#)
        #expect(utterance.spans == [Span("Olá "), Span("mundo", attributes: SpeechAttributes(pitch: 1.2))])
        #expect(utterance.defaults == SpeechAttributes(rate: 1.5, language: Self.tag("pt-BR")))
        let withoutLanguage = try Self.decode(#"{"ssml": "<speak>Hi</speak>", "language": "en-AU"}"#)
        #expect(withoutLanguage.defaults.language == Self.tag("en-AU"))
    }

    @Test(arguments: [
        (#"{"text": "a", "pitch": "high"}"#, "malformed", "pitch", "expected a number"),
        (#"{"text": "a", "pitch": 2.5}"#, "outOfRange", "pitch", "2.5 is out of range 0.0–2.0"),
        (#"{"text": "a", "rate": 0.2}"#, "outOfRange", "rate", "0.2 is out of range 0.5–2.0"),
        (#"{"text": "a", "volume": -1}"#, "outOfRange", "volume", "-1.0 is out of range 0.0–2.0"),
        (#"{"text": "a", "punctuation": 1}"#, "malformed", "punctuation", "expected true or false"),
        (#"{"text": "a", "spellOut": "yes"}"#, "malformed", "spellOut", "expected true or false"),
        (#"{"text": "a", "voice": " "}"#, "malformed", "voice", "must not be empty"),
        (#"{"spans": [{"text": "a", "voice": 7}]}"#, "malformed", "spans[0].voice", "expected a string"),
        (
            #"{"text": "a", "language": "en_GB"}"#, "malformed", "language",
            "'en_GB' is not a well-formed BCP 47 tag: invalid character '_' at position 3 (subtags are separated by '-')"
        ),
        (#"{"text": "a", "language": 7}"#, "malformed", "language", "expected a string"),
        (#"{"text": 5}"#, "malformed", "text", "expected a string"),
        (#"{"text": ""}"#, "malformed", "text", "there is no text to speak"),
        (#"{"text": "  \n "}"#, "malformed", "text", "there is no text to speak"),
        // Control and format characters are not spoken: text made only of them is silent.
        (#"{"text": "\u0001\u0007\u001b"}"#, "malformed", "text", "there is no text to speak"),
        (#"{"text": " \u0085\u200b\u00ad\ufeff "}"#, "malformed", "text", "there is no text to speak"),
        (
            #"{"spans": [{"text": "\u0002"}, {"text": "\u007f"}]}"#, "malformed", "spans",
            "there is no text to speak and no clip to play"
        ),
        (
            #"{"ssml": "<speak>&#x7;<s>&#x9f;</s></speak>"}"#, "malformed", "ssml",
            "the SSML document has no text to speak and no clip to play"
        ),
        (#"{}"#, "malformed", "text", "one of 'text', 'spans', 'ssml' or 'sequence' is required"),
        (
            #"{"priority": "high", "text": null}"#, "malformed", "text",
            "one of 'text', 'spans', 'ssml' or 'sequence' is required"
        ),
        (
            #"{"text": "a", "spans": [{"text": "b"}]}"#, "malformed", "spans",
            "'text' and 'spans' cannot be given together; give exactly one of 'text', 'spans' or 'ssml'"
        ),
        (
            #"{"spans": [{"text": "b"}], "ssml": "<speak>c</speak>"}"#, "malformed", "ssml",
            "'spans' and 'ssml' cannot be given together; give exactly one of 'text', 'spans' or 'ssml'"
        ),
        (#"{"spans": []}"#, "malformed", "spans", "must contain at least one span"),
        (#"{"spans": {"text": "a"}}"#, "malformed", "spans", "expected an array of spans"),
        (
            #"{"spans": [{"text": " "}, {"text": ""}, {"text": "\t"}]}"#, "malformed", "spans[1].text",
            "must not be empty (only a span with a pauseAfter or a mark may be)"
        ),
        (
            #"{"spans": [{"text": " "}, {"text": "\t"}]}"#, "malformed", "spans",
            "there is no text to speak and no clip to play"
        ),
        (#"{"spans": [{"text": "a"}, "b"]}"#, "malformed", "spans[1]", "expected an object with 'text'"),
        (#"{"spans": [{"text": "a"}, {"language": "de"}]}"#, "malformed", "spans[1].text", "a span needs 'text'"),
        (
            #"{"spans": [{"text": "a"}, {"text": "b"}, {"text": "c", "pitch": "1.2"}]}"#, "malformed", "spans[2].pitch",
            "expected a number"
        ),
        (
            #"{"spans": [{"text": "a"}, {"text": "b"}, {"text": "c", "pitch": 3}]}"#, "outOfRange", "spans[2].pitch",
            "3.0 is out of range 0.0–2.0"
        ),
        (
            #"{"spans": [{"text": "a", "pauseAfter": 60}]}"#, "outOfRange", "spans[0].pauseAfter",
            "60.0 is out of range 0.0–10.0"
        ),
        (
            #"{"spans": [{"text": "a", "language": "en-"}]}"#, "malformed", "spans[0].language",
            "'en-' is not a well-formed BCP 47 tag: empty subtag at position 2"
        ),
        (#"{"spans": [{"text": "a", "ipa": ""}]}"#, "malformed", "spans[0].ipa", "must not be empty"),
        (
            #"{"spans": [{"text": "a", "colour": "red", "Pitch": 1}]}"#, "malformed", "spans[0].Pitch",
            "unknown key 'Pitch' in a span; a span has text, language, pitch, rate, volume, punctuation, spellOut, ipa, voice, pauseAfter, mark, clip"
        ),
        (#"{"ssml": 3}"#, "malformed", "ssml", "expected a string"),
        (
            #"{"ssml": "<speak><audio src='x.wav'/></speak>"}"#, "unsupported", "ssml",
            #"audio src="x.wav" is not supported: only a clip of the library, src="clip:NAME" at line 1, column 15"#
        ),
        (#"{"ssml": "<speak>a</speak>", "pitch": 9}"#, "outOfRange", "pitch", "9.0 is out of range 0.0–2.0"),
    ])
    func errorsNameTheWireField(json: String, kind: String, field: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) { try Self.decode(json) }
        #expect(error?.kind == kind)
        #expect(error?.field == field)
        #expect(error?.message == message)
    }

    @Test(arguments: ["", "{", "[1, 2]", "\"text\"", "{\"text\": \"a\""])
    func bodiesThatAreNotAnObjectNameNoField(json: String) {
        let error = #expect(throws: SpeechInputError.self) { try Self.decode(json) }
        #expect(error?.kind == "malformed")
        #expect(error?.field == nil)
    }

    @Test func decodingErrorsMapToWireFields() {
        struct Request: Decodable {
            struct Inner: Decodable { var values: [Double] }
            var priority: String
            var inner: Inner
        }
        func error(_ json: String) -> SpeechInputError? {
            let decoded = Result { try JSONDecoder().decode(Request.self, from: Data(json.utf8)) }
            guard case .failure(let failure) = decoded else { return nil }
            return (failure as? DecodingError).map(SpeechInputError.from)
        }
        #expect(error(#"{"inner": {"values": []}}"#) == .malformed(field: "priority", "is required"))
        #expect(
            error(#"{"priority": 1, "inner": {"values": []}}"#) == .malformed(field: "priority", "expected a string"))
        #expect(
            error(#"{"priority": "a", "inner": {"values": [1, "x"]}}"#)
                == .malformed(field: "inner.values[1]", "expected a number"))
        #expect(
            error(#"{"priority": null, "inner": {"values": []}}"#)
                == .malformed(field: "priority", "expected a string, found null"))
        #expect(error("nope")?.field == nil)
    }

    // MARK: - Encoding

    @Test func plainUtteranceEncodesAsText() throws {
        let data = try JSONEncoder().encode(
            Utterance("Mind the gap", defaults: SpeechAttributes(language: Self.tag("en-gb"))))
        let object = try JSONSerialization.jsonObject(with: data) as? [String: String]
        #expect(object == ["text": "Mind the gap", "language": "en-GB"])
    }

    @Test func attributedUtteranceEncodesAsSpans() throws {
        let utterance = Utterance(
            spans: [Span("Platform "), Span("7", attributes: SpeechAttributes(spellOut: true), pauseAfter: 0.5)],
            defaults: SpeechAttributes(pitch: 1.1))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(utterance), as: UTF8.self)
        #expect(json == #"{"pitch":1.1,"spans":[{"text":"Platform "},{"pauseAfter":0.5,"spellOut":true,"text":"7"}]}"#)
    }

    static let roundTrips: [Utterance] = [
        Utterance("Hello"),
        Utterance(
            "Olá",
            defaults: SpeechAttributes(
                pitch: 1.4, rate: 0.8, volume: 0.5, punctuation: true,
                language: tag("pt-PT"), spellOut: false)),
        Utterance(spans: [Span("Hello", attributes: SpeechAttributes(pitch: 1.2))]),
        Utterance(spans: [Span("", pauseAfter: 0.3), Span("Tschüss")]),
        Utterance(
            spans: [
                Span("Next train to "),
                Span(
                    "Lisboa",
                    attributes: SpeechAttributes(
                        pitch: 0.7, rate: 2.0, volume: 0.0, punctuation: false, language: tag("pt-PT"), spellOut: true,
                        ipa: "liʒˈβoɐ"), pauseAfter: 1.0),
                Span(" 粵語", attributes: SpeechAttributes(language: tag("zh-yue-HK"))),
            ], defaults: SpeechAttributes(language: tag("en-GB"))),
    ]

    @Test(arguments: roundTrips)
    func roundTrip(utterance: Utterance) throws {
        let data = try JSONEncoder().encode(utterance)
        #expect(try Utterance.decode(json: data) == utterance)
        #expect(try JSONDecoder().decode(Utterance.self, from: data) == utterance)
    }

    @Test func ssmlRoundTripsThroughSpans() throws {
        let parsed = try Self.decode(
            #"{"ssml": "<speak>One<break time='300ms'/> <prosody rate='fast'>two</prosody></speak>"}"#)
        let again = try Utterance.decode(json: try JSONEncoder().encode(parsed))
        #expect(again == parsed)
        #expect(again.spans == [Span("One ", pauseAfter: 0.3), Span("two", attributes: SpeechAttributes(rate: 1.5))])
    }

    /// Boundaries travel as `sentenceStarts` and `paragraphStarts`, so an SSML utterance reaches
    /// an engine worker (which decodes the JSON) with its sentences.
    @Test func boundariesRoundTrip() throws {
        let parsed = try Utterance(ssml: "<speak><p><s>Platform one</s><s>Gate two</s></p><p>Mind the gap</p></speak>")
        #expect(parsed.boundaries == [13: .sentence, 22: .paragraph])
        let json = try JSONEncoder().encode(parsed)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(object["sentenceStarts"] as? [Int] == [13])
        #expect(object["paragraphStarts"] as? [Int] == [22])
        #expect(try Utterance.decode(json: json) == parsed)
        let plain = try Utterance.decode(json: JSONEncoder().encode(Utterance("No markup")))
        #expect(plain.boundaries.isEmpty)

        let written = try Self.decode(
            #"{"text": "Please wait here The train", "sentenceStarts": [17], "paragraphStarts": [17]}"#)
        #expect(written.boundaries == [17: .paragraph])
    }

    @Test(arguments: [
        (#"{"text": "ab", "sentenceStarts": [0]}"#, "outOfRange", "sentenceStarts"),
        (#"{"text": "ab", "paragraphStarts": [2]}"#, "outOfRange", "paragraphStarts"),
        (#"{"text": "ab", "sentenceStarts": 1}"#, "malformed", "sentenceStarts"),
        (#"{"text": "ab", "paragraphStarts": [1.5]}"#, "malformed", "paragraphStarts"),
    ])
    func badBoundariesNameTheField(json: String, kind: String, field: String) {
        let error = #expect(throws: SpeechInputError.self) { try Self.decode(json) }
        #expect(error?.kind == kind)
        #expect(error?.field == field)
    }
}
