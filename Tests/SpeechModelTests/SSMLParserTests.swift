import Foundation
import Testing

@testable import SpeechModel

@Suite struct SSMLParserTests {
    static func tag(_ string: String) -> LanguageTag { try! LanguageTag(string) }

    @Test func plainSpeakGivesOneSpanAndTheDefaultLanguage() throws {
        let utterance = try Utterance(
            ssml:
                #"<?xml version="1.0"?><speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="PT-pt">Olá  mundo</speak>"#
        )
        #expect(utterance.spans == [Span("Olá mundo")])
        #expect(utterance.defaults.language == Self.tag("pt-PT"))
    }

    @Test func prosodyLanguageAndSpellOutBecomeSpans() throws {
        let utterance = try Utterance(
            ssml: """
                <speak>
                  Next train to
                  <voice xml:lang="pt-PT"><prosody pitch="+20%" rate="slow">Lisboa</prosody></voice>,
                  platform <say-as interpret-as="characters">07402</say-as>.
                </speak>
                """)
        #expect(utterance.text == "Next train to Lisboa, platform 07402.")
        #expect(utterance.spans.count == 5)
        #expect(utterance.spans[0] == Span("Next train to "))
        #expect(utterance.spans[1].text == "Lisboa")
        #expect(utterance.spans[1].attributes == SpeechAttributes(pitch: 1.2, rate: 0.75, language: Self.tag("pt-PT")))
        #expect(utterance.spans[2] == Span(", platform ", attributes: SpeechAttributes()))
        #expect(utterance.spans[3] == Span("07402", attributes: SpeechAttributes(spellOut: true)))
        #expect(utterance.spans[4] == Span("."))
        #expect(utterance.defaults.language == nil)
    }

    @Test func nestedRelativeProsodyIsRelativeToTheEnclosingOne() throws {
        let utterance = try Utterance(
            ssml: #"<speak><prosody pitch="1.5">a <prosody pitch="-20%">b</prosody> c</prosody></speak>"#)
        // Whitespace goes with the text before it.
        #expect(utterance.spans.map(\.text) == ["a ", "b ", "c"])
        let pitches = utterance.spans.compactMap(\.attributes.pitch)
        #expect(pitches.count == 3)
        #expect(zip(pitches, [1.5, 1.2, 1.5]).allSatisfy { abs($0 - $1) < 1e-9 })
    }

    @Test(arguments: [
        ("pitch", "x-low", 0.7), ("pitch", "low", 0.85), ("pitch", "medium", 1.0), ("pitch", "high", 1.2),
        ("pitch", "x-high", 1.4), ("pitch", "+50%", 1.5), ("pitch", "-10%", 0.9), ("pitch", "120%", 1.2),
        ("pitch", "0.8", 0.8), ("pitch", "+12st", 2.0), ("pitch", "-12st", 0.5), ("pitch", "default", 1.0),
        ("rate", "x-slow", 0.5), ("rate", "fast", 1.5), ("rate", "x-fast", 2.0), ("rate", "150%", 1.5),
        ("rate", "+25%", 1.25), ("rate", "1.75", 1.75), ("rate", ".5", 0.5),
        ("volume", "silent", 0.0), ("volume", "soft", 0.5), ("volume", "loud", 1.0), ("volume", "-6dB", 0.501),
        ("volume", "50", 0.5), ("volume", "-50%", 0.5), ("volume", "25%", 0.25),
    ])
    func prosodyValuesMapIntoTheAttributeRanges(attribute: String, value: String, expected: Double) throws {
        let utterance = try Utterance(ssml: #"<speak><prosody \#(attribute)="\#(value)">x</prosody></speak>"#)
        let attributes = utterance.spans[0].attributes
        let actual = [attributes.pitch, attributes.rate, attributes.volume].compactMap { $0 }
        #expect(actual.count == 1)
        #expect(abs((actual.first ?? -1) - expected) < 0.001)
    }

    @Test(arguments: [
        (#"pitch="+200%""#, #"prosody pitch="+200%" at line 1, column 17 gives 3, outside 0.0–2.0"#),
        (
            #"rate="x-fast"><prosody rate="+10%""#,
            #"prosody rate="+10%" at line 1, column 40 gives 2.2, outside 0.5–2.0"#
        ),
        (#"rate="20%""#, #"prosody rate="20%" at line 1, column 17 gives 0.2, outside 0.5–2.0"#),
        (#"volume="+200%""#, #"prosody volume="+200%" at line 1, column 17 gives 3, outside 0.0–2.0"#),
        (#"volume="250""#, #"prosody volume="250" at line 1, column 17 gives 2.5, outside 0.0–2.0"#),
    ])
    func outOfRangeProsodyIsAnError(attributes: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(ssml: "<speak><prosody \(attributes)>x</prosody></speak>")
        }
        #expect(error?.kind == "outOfRange")
        #expect(error?.field == "ssml")
        #expect(error?.message == message)
    }

    @Test(arguments: ["loudish", "+x%", "1e3", "nan", "+5", "-2st"])
    func unreadableVolumeIsMalformed(value: String) {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(ssml: #"<speak><prosody volume="\#(value)">x</prosody></speak>"#)
        }
        #expect(error?.kind == "malformed")
        #expect(error?.message.hasPrefix(#"prosody volume="\#(value)" at line 1, column 17 is not a label ("#) == true)
    }

    @Test func hertzIsUnsupported() {
        let error = #expect(throws: SpeechInputError.self) {
            try Utterance(ssml: #"<speak><prosody pitch="200Hz">x</prosody></speak>"#)
        }
        #expect(error?.kind == "unsupported")
        #expect(error?.message.contains("Hz values are not supported") == true)
    }

    @Test func breaksBecomePausesAfterTheSpanBefore() throws {
        let utterance = try Utterance(
            ssml: """
                <speak><break time="250ms"/>One<break time="1s"/> two<break strength="strong"></break>
                three<break/><break time="1.5s" strength="weak"/></speak>
                """)
        #expect(
            utterance.spans == [
                Span("", pauseAfter: 0.25), Span("One ", pauseAfter: 1.0), Span("two ", pauseAfter: 0.75),
                Span("three", pauseAfter: 2.0),
            ])
        #expect(utterance.text == "One two three")
    }

    @Test(arguments: [
        (#"<break time="11s"/>"#, "outOfRange", "break time '11s' at line 1, column 16 is out of range 0.0–10.0 s"),
        (#"<break time="5"/>"#, "malformed", "break time '5' at line 1, column 16 must be like '500ms' or '1.5s'"),
        (#"<break time="-1s"/>"#, "malformed", "break time '-1s' at line 1, column 16 must be like '500ms' or '1.5s'"),
        (
            #"<break strength="huge"/>"#, "malformed",
            "break strength 'huge' is not one of none, x-weak, weak, medium, strong, x-strong at line 1, column 16"
        ),
        ("<break>x</break>", "malformed", "<break> must be empty at line 1, column 16"),
    ])
    func badBreaks(markup: String, kind: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(ssml: "<speak>a\(markup)</speak>") }
        #expect(error?.kind == kind)
        #expect(error?.message == message)
    }

    @Test func marksStartTheSpanOfTheTextAfterThem() throws {
        let utterance = try Utterance(
            ssml: """
                <speak><mark name="start"/>Platform four. <mark name="doors"/>Doors <mark name="a"/><mark name="b"/>\
                closing<mark name="pause"/><break time="500ms"/> now.<mark name="end"></mark></speak>
                """)
        #expect(
            utterance.spans == [
                Span("Platform four. ", mark: "start"), Span("Doors ", mark: "doors"), Span("", mark: "a"),
                Span("closing", mark: "b"), Span(" ", pauseAfter: 0.5, mark: "pause"), Span("now.", mark: nil),
                Span("", mark: "end"),
            ])
        #expect(utterance.text == "Platform four. Doors closing now.")
        #expect(utterance.spans.compactMap(\.mark) == ["start", "doors", "a", "b", "pause", "end"])
        // Empty spans that carry a mark survive the wire, as `speak --ssml` sends them.
        let decoded = try JSONDecoder().decode(Utterance.self, from: try JSONEncoder().encode(utterance))
        #expect(decoded == utterance)
    }

    @Test(arguments: [
        ("<mark/>", "malformed", "<mark> needs name at line 1, column 9"),
        (
            "<mark name='no space'/>", "malformed",
            "mark name 'no space' is not a mark name (letters, digits, '.', '-', '_', ':') at line 1, column 15"
        ),
        (
            "<mark name=''/>", "malformed",
            "mark name '' is not a mark name (letters, digits, '.', '-', '_', ':') at line 1, column 15"
        ),
        (
            "<mark name='m' time='1s'/>", "unsupported",
            "attribute 'time' on <mark> is not supported at line 1, column 24"
        ),
        ("<mark name='m'>x</mark>", "malformed", "<mark> must be empty at line 1, column 24"),
    ])
    func badMarks(markup: String, kind: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(ssml: "<speak>a\(markup)</speak>") }
        #expect(error?.field == "ssml")
        #expect(error?.kind == kind)
        #expect(error?.message == message)
    }

    @Test func sentencesAndParagraphsKeepTextReadable() throws {
        let utterance = try Utterance(
            ssml: """
                <speak><p><s>Platform one</s><s xml:lang="de">Gleis eins</s></p>
                <p>Second   paragraph.</p><p/>Tail</speak>
                """)
        #expect(utterance.text == "Platform one Gleis eins\nSecond paragraph.\nTail")
        #expect(utterance.spans[1] == Span("Gleis eins\n", attributes: SpeechAttributes(language: Self.tag("de"))))
    }

    @Test func entitiesAndCDATAComeOutAsLiteralText() throws {
        let utterance = try Utterance(
            ssml: """
                <speak>&lt;audio&gt; &amp; &quot;x&quot; &apos;y&apos; &#65;&#x42;&#x1F600; <![CDATA[<mark/> & more]]><!-- gone --></speak>
                """)
        #expect(utterance.text == #"<audio> & "x" 'y' AB😀 <mark/> & more"#)
        #expect(utterance.spans.count == 1)
    }

    @Test(arguments: [
        (
            "<speak><audio src='x.wav'/></speak>",
            #"audio src="x.wav" is not supported: only a clip of the library, src="clip:NAME" at line 1, column 15"#
        ),
        ("<speak><sub alias='x'>y</sub></speak>", "unsupported element <sub> at line 1, column 8"),
        (
            "<speak><voice name='Alex'>x</voice></speak>",
            "attribute 'name' on <voice> is not supported; voices are chosen by xml:lang at line 1, column 15"
        ),
        (
            "<speak><prosody contour='(0%,+20Hz)'>x</prosody></speak>",
            "attribute 'contour' on <prosody> is not supported at line 1, column 17"
        ),
        (
            "<speak><say-as interpret-as='date'>1/2</say-as></speak>",
            #"say-as interpret-as="date" is not supported (only "characters") at line 1, column 16"#
        ),
        (
            "<?xml-stylesheet href='a'?><speak>x</speak>",
            "processing instructions are not supported at line 1, column 1"
        ),
        ("<speak>x<?php echo 1 ?></speak>", "processing instructions are not supported at line 1, column 9"),
        (
            "<!DOCTYPE speak SYSTEM 'x.dtd'><speak>x</speak>",
            "DOCTYPE declarations are not supported at line 1, column 1"
        ),
        (
            "<speak><p xmlns:foo='bar'>x</p></speak>",
            "namespace declarations are only accepted on <speak> at line 1, column 11"
        ),
    ])
    func unsupportedMarkupIsNamed(ssml: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(ssml: ssml) }
        #expect(error?.kind == "unsupported")
        #expect(error?.field == "ssml")
        #expect(error?.message == message)
    }

    @Test(arguments: [
        ("<speak>x", "<speak> is never closed at line 1, column 1"),
        ("<speak>\n  <p>x</s></speak>", "</s> does not close <p> at line 2, column 7"),
        ("<speak>x</speak></speak>", "</speak> closes nothing at line 1, column 17"),
        ("<speak>x</speak><speak>y</speak>", "content after the </speak> element at line 1, column 17"),
        ("hello <speak>x</speak>", "text before <speak> at line 1, column 1"),
        ("<speak>x</speak> bye", "text after </speak> at line 1, column 17"),
        ("<p>x</p>", "the document must start with <speak>, found <p> at line 1, column 1"),
        ("<speak><speak>x</speak></speak>", "<speak> may only be the root element at line 1, column 8"),
        ("<speak>a < b</speak>", "expected element name, found ' ' at line 1, column 11"),
        ("<speak>fish &chips;</speak>", "unknown entity '&chips;' at line 1, column 13"),
        ("<speak>fish & chips</speak>", "'&' must start an entity such as &amp; at line 1, column 13"),
        ("<speak>&#0;</speak>", "'&#0;' is not a valid character reference at line 1, column 8"),
        ("<speak>&#xD800;</speak>", "'&#xD800;' is not a valid character reference at line 1, column 8"),
        ("<speak>&#12a;</speak>", "'&#12a;' is not a valid character reference at line 1, column 8"),
        ("<speak xml:lang=en>x</speak>", "the value of 'xml:lang' must be quoted at line 1, column 17"),
        ("<speak xml:lang='en' xml:lang='de'>x</speak>", "attribute 'xml:lang' appears twice at line 1, column 22"),
        ("<speak xml:lang='en'version='1.1'>x</speak>", "expected whitespace before an attribute at line 1, column 21"),
        (
            "<speak xml:lang='en_GB'>x</speak>",
            "xml:lang: 'en_GB' is not a well-formed BCP 47 tag: invalid character '_' at position 3 (subtags are separated by '-') at line 1, column 8"
        ),
        ("<speak><!-- open", "comment is never closed at line 1, column 8"),
        ("<speak><![CDATA[x", "CDATA section is never closed at line 1, column 8"),
        ("<speak><say-as>x</say-as></speak>", "<say-as> needs interpret-as at line 1, column 8"),
        ("<speak><p", "<p> tag is never closed at line 1, column 8"),
        ("<speak>x</speak", "expected '>' to end </speak> at line 1, column 16"),
    ])
    func malformedXMLNamesThePosition(ssml: String, message: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(ssml: ssml) }
        #expect(error?.kind == "malformed")
        #expect(error?.field == "ssml")
        #expect(error?.message == message)
    }

    @Test(arguments: ["", "   ", "<speak/>", "<speak>  <break time='1s'/> </speak>"])
    func documentsWithoutTextAreRejected(ssml: String) {
        let error = #expect(throws: SpeechInputError.self) { try Utterance(ssml: ssml) }
        #expect(error?.field == "ssml")
    }

    @Test func xmlSyntaxVariations() throws {
        let utterance = try Utterance(
            ssml:
                "\u{FEFF}<?xml version='1.0' encoding='UTF-8'?>\n<!-- intro -->\n<speak\n  xml:lang = 'en&#45;gb'\r\n>"
                + "a > b<voice\txml:lang=\"de\" ><voice xml:lang='fr'>c</voice>d</voice ><s/>e</speak >\n")
        #expect(utterance.defaults.language == Self.tag("en-GB"))
        #expect(
            utterance.spans == [
                Span("a > b"), Span("c", attributes: SpeechAttributes(language: Self.tag("fr"))),
                Span("d ", attributes: SpeechAttributes(language: Self.tag("de"))), Span("e"),
            ])
    }

    @Test func parsedUtterancesValidate() throws {
        let utterance = try Utterance(
            ssml:
                #"<speak xml:lang="en-GB"><prosody volume="x-soft" rate="x-fast">Mind the gap</prosody><break time="10s"/></speak>"#
        )
        try utterance.validate()
        #expect(
            utterance.spans == [
                Span("Mind the gap", attributes: SpeechAttributes(rate: 2.0, volume: 0.25), pauseAfter: 10)
            ])
    }

    /// `s` and `p` end the sentence before them even without punctuation: the utterance records
    /// where each starts, a paragraph taking precedence over the sentence it also starts.
    @Test func sentencesAndParagraphsAreBoundaries() throws {
        let paragraphs = try Utterance(ssml: "<speak><p>Please wait here</p><p>The train is coming</p></speak>")
        #expect(paragraphs.text == "Please wait here\nThe train is coming")
        #expect(paragraphs.boundaries == [17: .paragraph])
        let sentences = try Utterance(ssml: "<speak><s>Please wait here</s> <s>The train is coming</s></speak>")
        #expect(sentences.boundaries == [17: .sentence])

        let mixed = try Utterance(
            ssml: """
                <speak><p><s>Platform one</s><s xml:lang="de">Gleis eins</s></p>
                <p>Second   paragraph.</p><p/>Tail</speak>
                """)
        // "Platform one " is 13 characters, "Gleis eins\n" 11, "Second paragraph.\n" 18.
        #expect(mixed.boundaries == [13: .sentence, 24: .paragraph, 42: .paragraph])
        // No boundary before the first text or after the last, and none without s or p.
        #expect(try Utterance(ssml: "<speak><p><s>One</s></p><break/></speak>").boundaries.isEmpty)
        #expect(try Utterance(ssml: "<speak>One. Two<break/>three</speak>").boundaries.isEmpty)
        // A break between paragraphs stays with the text before; the boundary is where the next text starts.
        let paused = try Utterance(ssml: "<speak><p>One</p><break time='1s'/><p>Two</p></speak>")
        #expect(paused.spans.map(\.text) == ["One\n", "Two"])
        #expect(paused.spans[0].pauseAfter == 1)
        #expect(paused.boundaries == [4: .paragraph])
    }
}
