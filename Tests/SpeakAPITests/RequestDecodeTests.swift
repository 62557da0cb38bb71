import Foundation
import SpeakAPI
import SpeechModel
import Testing

/// The one decode of a request body, which the daemon's intake, `speak --json` and the fuzz
/// targets share: what each kind of bad body is called, and which field it names.
@Suite("Request body decode")
struct RequestDecodeTests {
    private static func refusal(_ body: String, limits: Utterance.Limits = .default) -> RequestBodyError? {
        do {
            _ = try AnnouncementRequest.decode(json: Data(body.utf8), limits: limits)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        arguments: [
            ("", "body"), ("null", "body"), ("[1, 2]", "body"), (#""text""#, "body"),
            (#"{"text": "a",}"#, nil), (#"{"text": "a", "text": "b"}"#, "text"),
        ] as [(String, String?)])
    func notARequestObjectIsMalformed(_ body: String, field: String?) throws {
        let error = try #require(Self.refusal(body))
        #expect(error.isMalformed, "\(error)")
        #expect(error.errorResponse.error.code == ErrorResponse.Code.malformedRequest)
        if let field { #expect(error.field == field, "\(error)") }
    }

    @Test(arguments: [
        (#"{"text": "a", "pich": 1.2}"#, "pich", "malformed"),
        (#"{"text": "a", "pitch": 1e309}"#, "pitch", "outOfRange"),
        (#"{"text": "a", "pitch": 9}"#, "pitch", "outOfRange"),
        (#"{"spans": [{"text": "a", "language": "en-"}]}"#, "spans[0].language", "malformed"),
    ])
    func aBadValueIsInvalidNamingItsField(_ body: String, field: String, code: String) throws {
        let error = try #require(Self.refusal(body))
        #expect(!error.isMalformed && !error.isTooLarge, "\(error)")
        #expect(error.field == field, "\(error)")
        #expect(error.errorResponse.error.code == code, "\(error)")
    }

    @Test(arguments: [
        (#"{"text": "a", "output": []}"#, "output", "outOfRange"),
        (#"{"text": "a", "output": ["hall", "platform1", "hall"]}"#, "output[2]", "outOfRange"),
        (#"{"text": "a", "output": [1]}"#, "output", "malformed"),
        (#"{"text": "a", "output": 7}"#, "output", "malformed"),
    ])
    func aBadListOfOutputsIsInvalidNamingIt(_ body: String, field: String, code: String) throws {
        let error = try #require(Self.refusal(body))
        #expect(!error.isMalformed && !error.isTooLarge, "\(error)")
        #expect(error.field == field, "\(error)")
        #expect(error.errorResponse.error.code == code, "\(error)")
    }

    @Test func outputIsANameOrAListOfThem() throws {
        let one = try AnnouncementRequest.decode(json: Data(#"{"text": "a", "output": "hall"}"#.utf8))
        #expect(one.output == "hall" && one.outputs == nil)
        let several = try AnnouncementRequest.decode(
            json: Data(#"{"text": "a", "output": ["platform1", "platform2"]}"#.utf8))
        #expect(several.output == nil && several.outputs == ["platform1", "platform2"])
        // The list is written back as a list.
        let again = try AnnouncementRequest.decode(json: try JSONEncoder().encode(several))
        #expect(again.outputs == ["platform1", "platform2"])
    }

    @Test func limitsNameTheFieldTheClientWrote() throws {
        let limits = Utterance.Limits(maxTextLength: 10, maxSpans: 2)
        let cases: [(String, String)] = [
            (#"{"text": "eleven char"}"#, "text"),
            (#"{"spans": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}"#, "spans"),
            (#"{"spans": [{"text": "twelve"}, {"text": " chars"}]}"#, "spans"),
            (#"{"ssml": "<speak>eleven char</speak>"}"#, "ssml"),
        ]
        for (body, field) in cases {
            let error = try #require(Self.refusal(body, limits: limits), "\(body)")
            #expect(error.isTooLarge, "\(body): \(error)")
            #expect(error.field == field, "\(body): \(error)")
            #expect(error.errorResponse.error.code == ErrorResponse.Code.tooLarge)
        }
        #expect(Self.refusal(#"{"text": "ten chars!"}"#, limits: limits) == nil)
    }

    @Test func aDecodedBodyKeepsItsKeysAndTextField() throws {
        let plain = try AnnouncementRequest.decodeNamingText(
            json: Data(#"{"text": "Doors closing", "priority": "high", "queue": false}"#.utf8))
        #expect(plain.textField == "text")
        #expect(Set(plain.keys) == ["text", "priority", "queue"])
        #expect(plain.request.delivery.priority == .high && !plain.request.delivery.queue)
        let ssml = try AnnouncementRequest.decodeNamingText(json: Data(#"{"ssml": "<speak>Hi</speak>"}"#.utf8))
        #expect(ssml.textField == "ssml")
    }
}
