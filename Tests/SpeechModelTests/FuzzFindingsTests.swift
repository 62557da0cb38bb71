import Foundation
import SpeechModel
import Testing

/// Inputs the fuzz targets in Fuzz/ found, each kept in Fuzz/Corpus as well, checked here
/// without a fuzzing build.
@Suite("Fuzz findings")
struct FuzzFindingsTests {
    static func utteranceError(_ json: String) -> SpeechInputError? {
        do {
            _ = try Utterance.decode(json: Data(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    /// The empty key, and keys that would read as path syntax, are quoted in the field, which
    /// was `""` or `spans[0].` (Fuzz/Corpus/json/found-empty-key-in-array.json).
    @Test(arguments: [
        (#"{"spans": [{"text": "a", "": 1}]}"#, #"spans[0][""]"#, "unknown key '' in a span"),
        (#"{"spans": [{"text": "a", "a.b": 1}]}"#, #"spans[0]["a.b"]"#, "unknown key 'a.b' in a span"),
        (#"{"spans": [{"": x}]}"#, #"spans[0][""]"#, "expected a value"),
        (#"{"": 1, "": 2}"#, #"[""]"#, "duplicate key"),
        (#"{"q\"\\\n": NaN}"#, #"["q\"\\\u000A"]"#, "NaN is not a JSON number"),
    ])
    func oddKeysAreQuotedInTheField(json: String, field: String, message: String) throws {
        let error = try #require(Self.utteranceError(json), "accepted \(json)")
        #expect(error.field == field, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }

    /// Plain keys keep their dotted path; the top level has no prefix.
    @Test func plainKeysKeepTheirPath() throws {
        let error = try #require(Self.utteranceError(#"{"spans": [{"text": "a", "pich_2-b": 1}]}"#))
        #expect(error.field == "spans[0].pich_2-b")
        let strict = try #require(Self.utteranceError(#"{"spans": [{"text": "a", "pitch": NaN}]}"#))
        #expect(strict.field == "spans[0].pitch")
        #expect(StrictJSON.memberPath("", "pitch") == "pitch")
        #expect(StrictJSON.memberPath("", "") == #"[""]"#)
        #expect(StrictJSON.memberPath("spans[1]", "é") == #"spans[1]["é"]"#)
    }

    /// A combining mark right after an `s` or `p` boundary joins the separator before it; the
    /// boundary was recorded past the end of the text, so the utterance the parser returned was
    /// refused on the wire as `sentenceStarts` (Fuzz/Corpus/ssml/combining-mark-after-boundary.xml).
    @Test(arguments: [
        ("<speak>a<s/>&#x301;</speak>", "a \u{301}", [1: Utterance.Boundary.sentence]),
        ("<speak>a<s/>&#x301;b</speak>", "a \u{301}b", [1: .sentence]),
        ("<speak>a<p/>&#x301;</speak>", "a\n\u{301}", [2: .paragraph]),
        ("<speak>a<s/>b</speak>", "a b", [2: .sentence]),
    ])
    func boundaryBeforeACombiningMarkStaysInsideTheText(
        ssml: String, text: String, boundaries: [Int: Utterance.Boundary]
    ) throws {
        let utterance = try Utterance(ssml: ssml)
        #expect(utterance.text == text)
        #expect(utterance.boundaries == boundaries)
        try utterance.validate()
        #expect(try Utterance.decode(json: try JSONEncoder().encode(utterance)) == utterance)
    }

    /// Every `prosody` attribute computed its line and column, reading the document from the
    /// start, before knowing whether there was an error: 64 KiB of `prosody` elements took
    /// seconds of CPU per request (Fuzz/Corpus/ssml/many-prosody.xml is a short one).
    @Test(.timeLimit(.minutes(1)))
    func manyProsodyElementsParseInLinearTime() throws {
        let element = #"<prosody pitch="1" rate="+5%" volume="loud">a</prosody>"#
        let ssml = "<speak>" + String(repeating: element, count: 65_536 / element.utf8.count) + "</speak>"
        let clock = ContinuousClock()
        var utterance: Utterance?
        let elapsed = try clock.measure { utterance = try Utterance(ssml: ssml) }
        #expect(utterance?.text.count == 65_536 / element.utf8.count)
        // Some 20 ms in a debug build once linear; many seconds before.
        #expect(elapsed < .seconds(2), "\(elapsed)")
    }
}
