import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SpeakAPI
import SpeakServer
import SpeakService
import SpeakTestSupport
import Testing

/// The HTTP front against a fake service: every code of the one error becomes its status in one
/// place, with the service's error body as it was, and the routes call the door and nothing else.
@Suite struct DoorMappingTests {
    static let codes: [(SpeakError.Code, HTTPResponse.Status)] = [
        (.malformed, .badRequest), (.tooLarge, .contentTooLarge), (.invalid, .unprocessableContent),
        (.notFound, .notFound), (.conflict, .conflict), (.queueFull, .tooManyRequests),
        (.audioUnavailable, .serviceUnavailable), (.shuttingDown, .serviceUnavailable),
        (.stateUnavailable, .serviceUnavailable), (.engineUnavailable, .serviceUnavailable), (.forbidden, .forbidden),
    ]

    @Test(arguments: codes)
    func eachCodeIsItsStatus(_ code: SpeakError.Code, _ status: HTTPResponse.Status) async throws {
        let service = FakeSpeakService()
        let refusal = SpeakError(code, name: "someCode", "refused by the test", field: "text")
        service.refuse("accept", with: refusal)
        let server = SpeakServer(service: service)
        try await Application(router: server.buildRouter()).test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"text": "Platform four"}"#))
            #expect(response.status == status)
            let body = try JSONDecoder().decode(ErrorResponse.self, from: Data(buffer: response.body))
            #expect(body == refusal.response)
            // A queue that is full says when to try again.
            #expect((response.headers[.retryAfter] != nil) == (code == .queueFull))
        }
        #expect(service.calls.map(\.name) == ["accept"])
    }

    /// Every kind of request reaches the service through its one call, with what the client said.
    @Test func routesCallTheDoor() async throws {
        let service = FakeSpeakService()
        let server = SpeakServer(service: service)
        try await Application(router: server.buildRouter()).test(.router) { client in
            let json: HTTPFields = [.contentType: "application/json"]
            _ = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: json, body: ByteBuffer(string: #"{"text": "Hello"}"#))
            _ = try await client.execute(uri: "/v1/announcements/a1", method: .delete)
            _ = try await client.execute(uri: "/v1/announcements/a1/pause", method: .post)
            _ = try await client.execute(uri: "/v1/repeat?count=2", method: .post)
            _ = try await client.execute(
                uri: "/v1/session", method: .put, headers: json, body: ByteBuffer(string: #"{"rate": 1.2}"#))
            _ = try await client.execute(uri: "/v1/voices", method: .get)
            let speech = try await client.execute(
                uri: "/v1/speech", method: .post, headers: json, body: ByteBuffer(string: #"{"text": "Hi"}"#))
            #expect(speech.status == .ok)
            #expect(speech.headers[.contentType] == "audio/wav")
            // A body the service's limits refuse never reaches it.
            let bad = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: json, body: ByteBuffer(string: #"{"txt": "Hi"}"#))
            #expect(bad.status == .unprocessableContent)
        }
        #expect(
            service.calls.map(\.description) == [
                "accept Hello from http", "cancel a1", "pause a1", "repeatLast default 2", "putSession default",
                "voices", "render Hi",
            ])
    }

    /// A clip upload and a clip's sound go through the door: the name, the body and `replace` as
    /// sent, the answer as the service gave it, its refusals mapped once.
    @Test func clipRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        let server = SpeakServer(service: service)
        try await Application(router: server.buildRouter()).test(.router) { client in
            let wav: HTTPFields = [.contentType: "audio/wav"]
            let created = try await client.execute(
                uri: "/v1/clips/lift-out", method: .put, headers: wav, body: ByteBuffer(bytes: [1, 2, 3]))
            #expect(created.status == .created)
            #expect(created.headers[.location] == "/v1/clips/lift-out")
            let stored = try JSONDecoder().decode(ClipStored.self, from: Data(buffer: created.body))
            #expect(stored.clip.name == "lift-out" && !stored.replaced)
            let replaced = try await client.execute(
                uri: "/v1/clips/lift-out?replace=true", method: .put, headers: wav, body: ByteBuffer(bytes: [1, 2]))
            #expect(replaced.status == .ok)
            // Not audio: refused before the door.
            let text = try await client.execute(
                uri: "/v1/clips/lift-out", method: .put, headers: [.contentType: "text/plain"],
                body: ByteBuffer(string: "x"))
            #expect(text.status == .unsupportedMediaType)
            let badReplace = try await client.execute(
                uri: "/v1/clips/lift-out?replace=maybe", method: .put, headers: wav, body: ByteBuffer(bytes: [1]))
            #expect(badReplace.status == .unprocessableContent)
            let sound = try await client.execute(uri: "/v1/clips/lift-out", method: .get)
            #expect(sound.status == .ok)
            #expect(sound.headers[.contentType] == "audio/wav")
            #expect(sound.body.readableBytes == 44 + 2 * 2_205)
        }
        #expect(
            service.calls.map(\.description) == [
                "putClip lift-out 3 bytes", "putClip lift-out 2 bytes replace", "clipSound lift-out",
            ])
    }

    @Test(arguments: [
        (
            SpeakError(.forbidden, name: "clipUploadsOff", "clip uploads are off: --clips-upload"),
            HTTPResponse.Status.forbidden
        ),
        (
            SpeakError(.invalid, name: "invalidClip", "sample 3 is not a number (NaN)", field: "body"),
            .unprocessableContent
        ),
        (
            SpeakError(.invalid, name: "invalidClipName", "'..' is not a clip name", field: "name"),
            .unprocessableContent
        ),
        (SpeakError(.conflict, name: "clipExists", "a clip named 'a' exists", field: "name"), .conflict),
        (SpeakError(.notFound, name: "unknownClip", "no clip 'a'", field: "name"), .notFound),
    ])
    func clipRefusalsAreMappedOnce(_ refusal: SpeakError, _ status: HTTPResponse.Status) async throws {
        let service = FakeSpeakService()
        service.refuse("putClip", with: refusal)
        service.refuse("clipSound", with: refusal)
        let server = SpeakServer(service: service)
        try await Application(router: server.buildRouter()).test(.router) { client in
            let put = try await client.execute(
                uri: "/v1/clips/a", method: .put, headers: [.contentType: "application/octet-stream"],
                body: ByteBuffer(bytes: [0]))
            let get = try await client.execute(uri: "/v1/clips/a", method: .get)
            for response in [put, get] {
                #expect(response.status == status)
                let body = try JSONDecoder().decode(ErrorResponse.self, from: Data(buffer: response.body))
                #expect(body == refusal.response)
            }
        }
    }
}
