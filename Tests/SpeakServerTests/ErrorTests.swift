import AnnouncementIntake
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SpeakAPI
import SpeakServer
import SpeakService
import SpeechModel
import Testing

/// One bad request and the error it must produce.
struct BadRequest: Sendable, CustomTestStringConvertible {
    var name: String
    var body: String
    var status: HTTPResponse.Status
    var code: String
    var field: String?

    var testDescription: String { name }
}

@Suite("Errors")
struct ErrorTests {
    static let badBodies: [BadRequest] = [
        BadRequest(name: "not JSON", body: "{text: hello", status: .badRequest, code: "malformedRequest"),
        BadRequest(name: "empty body", body: "", status: .badRequest, code: "malformedRequest", field: "body"),
        BadRequest(name: "array", body: "[1, 2]", status: .badRequest, code: "malformedRequest", field: "body"),
        BadRequest(name: "null", body: "null", status: .badRequest, code: "malformedRequest", field: "body"),
        BadRequest(name: "a string", body: #""hello""#, status: .badRequest, code: "malformedRequest", field: "body"),
        BadRequest(
            name: "no text", body: #"{"pitch": 1.0}"#, status: .unprocessableContent, code: "malformed", field: "text"),
        BadRequest(
            name: "text and spans", body: #"{"text": "a", "spans": [{"text": "b"}]}"#, status: .unprocessableContent,
            code: "malformed", field: "spans"),
        BadRequest(
            name: "text not a string", body: #"{"text": 5}"#, status: .unprocessableContent, code: "malformed",
            field: "text"),
        BadRequest(
            name: "pitch out of range", body: #"{"text": "a", "pitch": 3.5}"#, status: .unprocessableContent,
            code: "outOfRange", field: "pitch"),
        BadRequest(
            name: "span pitch out of range", body: #"{"spans": [{"text": "a"}, {"text": "b", "pitch": -1}]}"#,
            status: .unprocessableContent, code: "outOfRange", field: "spans[1].pitch"),
        BadRequest(
            name: "rate out of range", body: #"{"text": "a", "rate": 9}"#, status: .unprocessableContent,
            code: "outOfRange", field: "rate"),
        BadRequest(
            name: "volume not a number", body: #"{"text": "a", "volume": "loud"}"#, status: .unprocessableContent,
            code: "malformed", field: "volume"),
        BadRequest(
            name: "malformed language", body: #"{"text": "a", "language": "en_GB!"}"#, status: .unprocessableContent,
            code: "malformed", field: "language"),
        BadRequest(
            name: "language without a voice", body: #"{"text": "a", "language": "xx"}"#, status: .unprocessableContent,
            code: "notFound", field: "language"),
        BadRequest(
            name: "span language without a voice",
            body: #"{"spans": [{"text": "a"}, {"text": "b", "language": "tlh"}]}"#, status: .unprocessableContent,
            code: "notFound", field: "spans[1].language"),
        BadRequest(
            name: "unknown priority", body: #"{"text": "a", "priority": "urgent"}"#, status: .unprocessableContent,
            code: "malformed", field: "priority"),
        BadRequest(
            name: "queue not a bool", body: #"{"text": "a", "queue": "no"}"#, status: .unprocessableContent,
            code: "malformed", field: "queue"),
        BadRequest(
            name: "negative expiry", body: #"{"text": "a", "expiresAfter": -3}"#, status: .unprocessableContent,
            code: "outOfRange", field: "expiresAfter"),
        BadRequest(
            name: "misspelt key", body: #"{"text": "a", "priorty": "high"}"#, status: .unprocessableContent,
            code: "malformed", field: "priorty"),
        BadRequest(
            name: "blank text", body: #"{"text": "   "}"#, status: .unprocessableContent, code: "malformed",
            field: "text"),
        BadRequest(
            name: "only control characters", body: #"{"text": "\u0001\u0007\u001b"}"#,
            status: .unprocessableContent, code: "malformed", field: "text"),
        BadRequest(
            name: "unknown key in a span", body: #"{"spans": [{"text": "a", "pich": 1.2}]}"#,
            status: .unprocessableContent, code: "malformed", field: "spans[0].pich"),
        BadRequest(
            name: "unsupported SSML element", body: #"{"ssml": "<speak><audio src='x'/></speak>"}"#,
            status: .unprocessableContent, code: "unsupported", field: "ssml"),
        BadRequest(
            name: "span without text", body: #"{"spans": [{"pitch": 1}]}"#, status: .unprocessableContent,
            code: "malformed", field: "spans[0].text"),
        // Strict JSON: what Foundation's decoder would let through or report without a field.
        BadRequest(
            name: "duplicate key", body: #"{"text": "a", "text": "b"}"#, status: .badRequest,
            code: "malformedRequest", field: "text"),
        BadRequest(
            name: "duplicate key in a span",
            body: #"{"spans": [{"text": "a"}, {"text": "b", "pitch": 1, "pitch": 2}]}"#,
            status: .badRequest, code: "malformedRequest", field: "spans[1].pitch"),
        BadRequest(
            name: "duplicate key spelt with an escape", body: #"{"text": "a", "p\u0069tch": 1, "pitch": 1}"#,
            status: .badRequest, code: "malformedRequest", field: "pitch"),
        BadRequest(
            name: "trailing comma in the object", body: #"{"text": "a",}"#, status: .badRequest,
            code: "malformedRequest", field: "text"),
        BadRequest(
            name: "trailing comma in spans", body: #"{"spans": [{"text": "a"},]}"#, status: .badRequest,
            code: "malformedRequest", field: "spans[0]"),
        BadRequest(
            name: "lone high surrogate", body: #"{"text": "\ud800"}"#, status: .badRequest, code: "malformedRequest",
            field: "text"),
        BadRequest(
            name: "lone low surrogate in a span", body: #"{"spans": [{"text": "a\udc00b"}]}"#, status: .badRequest,
            code: "malformedRequest", field: "spans[0].text"),
        BadRequest(
            name: "NaN", body: #"{"text": "a", "pitch": NaN}"#, status: .badRequest, code: "malformedRequest",
            field: "pitch"),
        BadRequest(
            name: "-Infinity", body: #"{"text": "a", "rate": -Infinity}"#, status: .badRequest,
            code: "malformedRequest", field: "rate"),
        BadRequest(
            name: "number out of range", body: #"{"text": "a", "volume": 1e309}"#, status: .unprocessableContent,
            code: "outOfRange", field: "volume"),
        BadRequest(
            name: "span number out of range", body: #"{"spans": [{"text": "a", "pauseAfter": -4e400}]}"#,
            status: .unprocessableContent, code: "outOfRange", field: "spans[0].pauseAfter"),
        BadRequest(
            name: "comment", body: #"{"text": "a" /* note */}"#, status: .badRequest, code: "malformedRequest",
            field: "text"),
        BadRequest(
            name: "leading zero", body: #"{"text": "a", "pitch": 01}"#, status: .badRequest, code: "malformedRequest",
            field: "pitch"),
        BadRequest(
            name: "raw newline in a string", body: "{\"text\": \"a\nb\"}", status: .badRequest,
            code: "malformedRequest", field: "text"),
        BadRequest(
            name: "text after the object", body: #"{"text": "a"} {"text": "b"}"#, status: .badRequest,
            code: "malformedRequest"),
        BadRequest(
            name: "nested too deep", body: #"{"text": "a", "x": "# + String(repeating: "[", count: 100),
            status: .badRequest, code: "malformedRequest", field: "x" + String(repeating: "[0]", count: 63)),
    ]

    @Test(.timeLimit(.minutes(1)), arguments: badBodies)
    func badBodyIsRefused(_ bad: BadRequest) async throws {
        let harness = Harness()
        try await harness.test { client in
            for route in ["/v1/announcements", "/v1/speech"] {
                let response = try await client.execute(uri: route, method: .post, body: ByteBuffer(string: bad.body))
                #expect(response.status == bad.status, "\(route)")
                #expect(response.headers[.contentType] == WireFormat.jsonContentType)
                let error = try decode(ErrorResponse.self, response).error
                #expect(error.code == bad.code, "\(route): \(error.message)")
                #expect(error.field == bad.field, "\(route): \(error.message)")
                #expect(!error.message.isEmpty)
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(1))) func expiryBeyondADayIs422() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "a", "expiresAfter": 100000}"#))
            #expect(response.status == .unprocessableContent)
            let error = try decode(ErrorResponse.self, response).error
            #expect(error.field == "expiresAfter")
            #expect(error.message.contains("86400"))
        }
    }

    @Test(.timeLimit(.minutes(1))) func bodyOverLimitIs413() async throws {
        let harness = Harness(limits: ServiceLimits(maxBodyBytes: 100))
        try await harness.test { client in
            let text = String(repeating: "a", count: 200)
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "\#(text)"}"#))
            #expect(response.status == .contentTooLarge)
            let error = try decode(ErrorResponse.self, response).error
            #expect(error.code == "tooLarge")
            #expect(error.field == "body")
        }
    }

    /// The HTTP route reads a body up to the intake's limit and refuses it past there with the
    /// intake's one message, the one the fleet link sends for an MQTT payload.
    @Test(.timeLimit(.minutes(1))) func bodyOverLimitIsTheIntakesRefusal() async throws {
        let harness = Harness(limits: ServiceLimits(maxBodyBytes: 100))
        try await harness.test { client in
            let text = String(repeating: "a", count: 200)
            let body = jsonBody(#"{"text": "\#(text)"}"#)
            let declared = try await client.execute(
                uri: "/v1/announcements", method: .post,
                headers: [.contentType: "application/json", .contentLength: "\(body.readableBytes)"], body: body)
            #expect(declared.status == .contentTooLarge)
            #expect(
                try decode(ErrorResponse.self, declared).error.message
                    == "the body is \(body.readableBytes) bytes; the limit is 100")
            let undeclared = try await client.execute(
                uri: "/v1/session", method: .put, headers: [.contentType: "application/json"], body: body)
            #expect(undeclared.status == .contentTooLarge)
            #expect(try decode(ErrorResponse.self, undeclared).error.message.hasSuffix("; the limit is 100"))
        }
    }

    /// Bytes that are not UTF-8 in a string name the field and the byte, instead of "expected a string".
    @Test(.timeLimit(.minutes(1))) func invalidUTF8NamesTheField() async throws {
        let harness = Harness()
        let bodies: [([UInt8], String?)] = [
            (Array(#"{"text": "caf"#.utf8) + [0xE9] + Array(#""}"#.utf8), "text"),
            (
                Array(#"{"spans": [{"text": "a"}, {"text": ""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}]}"#.utf8),
                "spans[1].text"
            ),
            (Array(#"{"text": "a", "language": ""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8), "language"),
            (Array(#"{"text": "a", ""#.utf8) + [0xFF] + Array(#"": 1}"#.utf8), nil),
        ]
        try await harness.test { client in
            for (bytes, field) in bodies {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .post, body: ByteBuffer(bytes: bytes))
                #expect(response.status == .badRequest)
                let error = try decode(ErrorResponse.self, response).error
                #expect(error.code == "malformedRequest")
                #expect(error.field == field, "\(error.message)")
                #expect(error.message.contains("UTF-8"), "\(error.message)")
            }
            #expect(await harness.running.queue.snapshot().isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(1))) func ssmlErrorsNameSSML() async throws {
        let harness = Harness(limits: ServiceLimits(maxTextLength: 10, maxSpans: 2))
        try await harness.test { client in
            let long = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"ssml": "<speak>eleven chars</speak>"}"#))
            #expect(long.status == .contentTooLarge)
            #expect(try decode(ErrorResponse.self, long).error.field == "ssml")
            let many = try await client.execute(
                uri: "/v1/speech", method: .post,
                body: jsonBody(
                    #"{"ssml": "<speak>a<break time='1s'/>b<break time='1s'/>c<break time='1s'/>d</speak>"}"#))
            #expect(many.status == .contentTooLarge)
            #expect(try decode(ErrorResponse.self, many).error.field == "ssml")
            let invalid = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"ssml": "<speak>unclosed"}"#))
            #expect(invalid.status == .unprocessableContent)
            #expect(try decode(ErrorResponse.self, invalid).error.field == "ssml")
            let notAString = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"ssml": 5}"#))
            #expect(notAString.status == .unprocessableContent)
            #expect(try decode(ErrorResponse.self, notAString).error.field == "ssml")
        }
    }

    @Test(.timeLimit(.minutes(1))) func textOverLimitIs413NamingText() async throws {
        let harness = Harness(limits: ServiceLimits(maxTextLength: 10))
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "eleven char"}"#))
            #expect(response.status == .contentTooLarge)
            let error = try decode(ErrorResponse.self, response).error
            #expect(error.code == "tooLarge")
            #expect(error.field == "text")
            let fits = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "ten chars!"}"#))
            #expect(fits.status == .accepted)
        }
    }

    @Test(.timeLimit(.minutes(1))) func spansOverLimitIs413NamingSpans() async throws {
        let harness = Harness(limits: ServiceLimits(maxSpans: 2))
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/speech", method: .post,
                body: jsonBody(#"{"spans": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}"#))
            #expect(response.status == .contentTooLarge)
            #expect(try decode(ErrorResponse.self, response).error.field == "spans")
        }
    }

    @Test(.timeLimit(.minutes(1))) func unknownIdIs404() async throws {
        let harness = Harness()
        try await harness.test { client in
            for method in [HTTPRequest.Method.get, .delete] {
                let response = try await client.execute(uri: "/v1/announcements/no-such-id", method: method)
                #expect(response.status == .notFound)
                let error = try decode(ErrorResponse.self, response).error
                #expect(error.code == "unknownAnnouncement")
                #expect(error.field == "id")
                #expect(error.message.contains("no-such-id"))
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func unknownRouteIs404JSON() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(uri: "/v2/nothing", method: .get)
            #expect(response.status == .notFound)
            #expect(try decode(ErrorResponse.self, response).error.code == "notFound")
        }
    }

    @Test(.timeLimit(.minutes(1))) func fullQueueIs429() async throws {
        let harness = Harness(capacity: 2)
        try await harness.test { client in
            for _ in 0..<3 {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "a"}"#))
                #expect(response.status == .accepted)
            }
            let refused = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "b"}"#))
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "1")
            #expect(try decode(ErrorResponse.self, refused).error.code == "queueFull")
            #expect(await harness.running.queue.snapshot().count == 3)
        }
    }

    /// A kiosk page is refused with 429 like any client, and CORS lets it read when to retry.
    @Test(.timeLimit(.minutes(1))) func retryAfterIsExposedToTheKioskPage() async throws {
        let harness = Harness(capacity: 1, settings: ServerSettings(corsOrigin: "http://kiosk.local:8080"))
        try await harness.test { client in
            let kiosk: HTTPFields = [.origin: "http://kiosk.local:8080"]
            for _ in 0..<2 {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .post, headers: kiosk, body: jsonBody(#"{"text": "a"}"#))
                #expect(response.status == .accepted)
                #expect(response.headers[.location] != nil)
                #expect(response.headers[.accessControlExposeHeaders]?.contains("Location") == true)
            }
            let refused = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: kiosk, body: jsonBody(#"{"text": "b"}"#))
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "1")
            #expect(refused.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
            let exposed = try #require(refused.headers[.accessControlExposeHeaders])
            let names = exposed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            #expect(names.contains("retry-after"), "Access-Control-Expose-Headers: \(exposed)")
            #expect(names.contains("location"), "Access-Control-Expose-Headers: \(exposed)")
        }
    }

    @Test(.timeLimit(.minutes(1))) func audioUnavailableIs503() async throws {
        let harness = Harness()
        harness.health.setAudio(up: false)
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "a"}"#))
            #expect(response.status == .serviceUnavailable)
            let error = try decode(ErrorResponse.self, response).error
            #expect(error.code == "audioUnavailable")
            #expect(error.message.contains("the sink went away"))
            #expect(await harness.running.queue.snapshot().isEmpty)
            // Rendering to WAV needs no audio.
            let speech = try await client.execute(uri: "/v1/speech", method: .post, body: jsonBody(#"{"text": "a"}"#))
            #expect(speech.status == .ok)
        }
    }

    @Test(.timeLimit(.minutes(1))) func shuttingDownIs503() async throws {
        let harness = Harness()
        try await harness.test { client in
            await harness.running.queue.shutdown()
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "a"}"#))
            #expect(response.status == .serviceUnavailable)
            #expect(try decode(ErrorResponse.self, response).error.code == "shuttingDown")
        }
    }

    @Test(.timeLimit(.minutes(1))) func badWaitValueIs422() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/announcements?wait=maybe", method: .post, body: jsonBody(#"{"text": "a"}"#))
            #expect(response.status == .unprocessableContent)
            #expect(try decode(ErrorResponse.self, response).error.field == "wait")
        }
    }
}
