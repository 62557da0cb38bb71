import Foundation
import Testing

@testable import SpeechModel

/// Clip spans (`{"clip": "NAME"}`, SSML `<audio src="clip:NAME"/>`): decoded, checked and
/// refused where they are wrong, naming the field.
@Suite struct ClipSpanTests {
    static func decode(_ json: String) throws(SpeechInputError) -> Utterance {
        try Utterance.decode(json: Data(json.utf8))
    }

    static func field(of json: String) -> String? {
        do {
            _ = try decode(json)
            return nil
        } catch {
            return error.field
        }
    }

    @Test func aClipSpanHasNoTextAndRoundTrips() throws {
        let utterance = try Self.decode(
            #"{"spans": [{"clip": "next-train"}, {"text": "Lisboa Santa Apolónia", "language": "pt-PT"}, {"clip": "platform", "pauseAfter": 0.3, "mark": "p"}]}"#
        )
        #expect(utterance.spans.map(\.clip) == ["next-train", nil, "platform"])
        #expect(utterance.text == "Lisboa Santa Apolónia")
        #expect(utterance.spans[2].pauseAfter == 0.3 && utterance.spans[2].mark == "p")
        #expect(utterance.hasClips)
        try utterance.validate(limits: .default)
        let encoded = try JSONEncoder().encode(utterance)
        #expect(try Utterance.decode(json: encoded) == utterance)
    }

    @Test func clipsAloneAreSomethingToPlay() throws {
        let utterance = try Self.decode(#"{"spans": [{"clip": "gong"}]}"#)
        try utterance.validate(limits: .default)
        #expect(utterance.spans == [.clip("gong")])
    }

    @Test func badClipSpansAreRefusedNamingTheField() {
        #expect(Self.field(of: #"{"spans": [{"text": "a"}, {"clip": "../../etc/shadow"}]}"#) == "spans[1].clip")
        #expect(Self.field(of: #"{"spans": [{"clip": ".hidden"}]}"#) == "spans[0].clip")
        #expect(Self.field(of: #"{"spans": [{"clip": ""}]}"#) == "spans[0].clip")
        #expect(Self.field(of: #"{"spans": [{"clip": "a/b"}]}"#) == "spans[0].clip")
        #expect(Self.field(of: #"{"spans": [{"clip": 3}]}"#) == "spans[0].clip")
        #expect(Self.field(of: #"{"spans": [{"clip": "gong", "text": "Gong"}]}"#) == "spans[0].text")
        #expect(Self.field(of: #"{"spans": [{"clip": "gong", "pitch": 1.2}]}"#) == "spans[0].pitch")
        #expect(Self.field(of: #"{"spans": [{"clip": "gong", "language": "en"}]}"#) == "spans[0].language")
        #expect(Self.field(of: #"{"spans": [{"clip": "gong", "pauseAfter": 11}]}"#) == "spans[0].pauseAfter")
        #expect(Self.field(of: #"{"spans": [{"clip": "gong", "mark": "a b"}]}"#) == "spans[0].mark")
        // Built in code rather than decoded: the same checks.
        #expect(throws: SpeechInputError.self) {
            try Utterance(spans: [Span("Gong", clip: "gong")]).validate()
        }
    }

    @Test func clipNames() {
        for good in ["gong", "Next_Train-2", "brand.line", "0800"] { #expect(Span.isValidClipName(good), "\(good)") }
        for bad in [
            "", ".", "..", "a..b", "-a", "_a", ".a", "a/b", "a\\b", "ação", "a b", String(repeating: "a", count: 129),
        ] {
            #expect(!Span.isValidClipName(bad), "\(bad)")
        }
    }

    @Test func ssmlAudioIsAClipSpan() throws {
        let utterance = try Utterance(
            ssml:
                #"<speak><audio src="clip:next-train"/> Lisboa <mark name="m1"/><audio src="clip:platform"></audio> four</speak>"#
        )
        #expect(utterance.spans.map(\.clip) == ["next-train", nil, "platform", nil])
        #expect(utterance.spans[2].mark == "m1")
        #expect(utterance.text == "Lisboa four")
        #expect(throws: SpeechInputError.self) { try Utterance(ssml: #"<speak><audio src="http://x/a.wav"/></speak>"#) }
        #expect(throws: SpeechInputError.self) { try Utterance(ssml: #"<speak><audio src="clip:../x"/></speak>"#) }
        #expect(throws: SpeechInputError.self) { try Utterance(ssml: #"<speak><audio/></speak>"#) }
        #expect(throws: SpeechInputError.self) {
            try Utterance(ssml: #"<speak><audio src="clip:a">alt</audio></speak>"#)
        }
        let only = try Utterance(ssml: #"<speak><audio src="clip:gong"/></speak>"#)
        #expect(only.spans == [.clip("gong")])
    }

    @Test func aSequencePartMayEndWithAClip() throws {
        let utterance = try Self.decode(
            #"{"sequence": [{"language": "pt-PT", "spans": [{"text": "Linha quatro."}, {"clip": "gong"}]}, {"language": "en", "text": "Platform four."}], "sequenceGap": 0.5}"#
        )
        #expect(utterance.spans.map(\.clip) == [nil, "gong", nil])
        #expect(utterance.spans[1].pauseAfter == 0.5)
        #expect(utterance.text == "Linha quatro.Platform four.")
        #expect(utterance.boundaries["Linha quatro.".count] == .paragraph)
        try utterance.validate(limits: .default)
    }

    @Test func aPartIsItsSpansWithTheirBoundaries() {
        let utterance = Utterance(
            spans: [Span("One. "), .clip("gong"), Span("Two. Three.")], boundaries: [5: .paragraph, 10: .sentence])
        let part = utterance.part(spans: 2..<3)
        #expect(part.text == "Two. Three.")
        #expect(part.boundaries == [5: .sentence])
        #expect(
            SpeechInputError.malformed(field: "spans[0].pitch", "x").reindexed(spansFrom: 2).field == "spans[2].pitch")
    }
}
