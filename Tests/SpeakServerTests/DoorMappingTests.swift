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

/// The rest of the HTTP routes against the fake service, grouped as the door groups them
/// (announce, control, sessions, schedules, the audit, status): each calls its one service
/// method with what the client sent, answers with the service's result, and maps its refusal
/// through `APIError` alone.
@Suite struct DoorRouteTests {
    static let json: HTTPFields = [.contentType: "application/json"]

    /// Runs `body` against the router of a server over `service`.
    func withRouter(
        _ service: FakeSpeakService, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        let server = SpeakServer(service: service)
        try await Application(router: server.buildRouter()).test(.router) { client in try await body(client) }
    }

    @Test func announceRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        try await withRouter(service) { client in
            // `?wait=true` answers with the service's `finished` of the id it accepted.
            let waited = try await client.execute(
                uri: "/v1/announcements?wait=true", method: .post, headers: Self.json,
                body: ByteBuffer(string: #"{"text": "Hello"}"#))
            #expect(waited.status == .ok)
            let finished = try WireFormat.decoder().decode(AnnouncementEvent.self, from: Data(buffer: waited.body))
            #expect(finished.type == .finished && finished.id == "fake-1")
            let list = try await client.execute(uri: "/v1/announcements", method: .get)
            #expect(list.status == .ok)
            let known = try await client.execute(uri: "/v1/announcements/fake-1", method: .get)
            #expect(known.status == .ok)
            let status = try WireFormat.decoder().decode(AnnouncementStatus.self, from: Data(buffer: known.body))
            #expect(status.text == "Hello" && status.state == .queued)
            // No output knows it: the service says nil, the route 404 naming `id`.
            let unknown = try await client.execute(uri: "/v1/announcements/nope", method: .get)
            #expect(unknown.status == .notFound)
            let refusal = try JSONDecoder().decode(ErrorResponse.self, from: Data(buffer: unknown.body))
            #expect(refusal.error.code == ErrorResponse.Code.unknownAnnouncement && refusal.error.field == "id")
            let prerendered = try await client.execute(
                uri: "/v1/prerender", method: .post, headers: Self.json, body: ByteBuffer(string: #"{"text": "Hi"}"#))
            #expect(prerendered.status == .ok)
        }
        #expect(
            service.calls.map(\.description) == [
                "accept Hello from http", "finished fake-1", "snapshot", "status fake-1", "status nope", "prerender",
            ])
    }

    @Test func controlRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        try await withRouter(service) { client in
            let cancelled = try await client.execute(uri: "/v1/announcements?output=hall", method: .delete)
            #expect(cancelled.status == .ok)
            #expect(try await client.execute(uri: "/v1/pause?output=hall", method: .post).status == .ok)
            #expect(try await client.execute(uri: "/v1/resume?output=hall", method: .post).status == .ok)
            #expect(try await client.execute(uri: "/v1/announcements/a1/resume", method: .post).status == .ok)
            let repeated = try await client.execute(uri: "/v1/announcements/a1/repeat", method: .post)
            #expect(repeated.status == .accepted)
            #expect(repeated.headers[.location] == "/v1/announcements/fake-1")
            // A place to pause at that is neither `now` nor `word` never reaches the service.
            let bad = try await client.execute(uri: "/v1/announcements/a1/pause?at=soon", method: .post)
            #expect(bad.status == .unprocessableContent)
        }
        #expect(
            service.calls.map(\.description) == [
                "cancelAll hall", "pause hall", "resume hall", "resume a1", "repeatAnnouncement a1",
            ])
    }

    @Test func sessionRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        try await withRouter(service) { client in
            let started = try await client.execute(
                uri: "/v1/session", method: .put, headers: Self.json,
                body: ByteBuffer(string: #"{"output": "hall", "volume": 0.5}"#))
            #expect(started.status == .created)
            #expect(try await client.execute(uri: "/v1/session", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/v1/session?output=hall", method: .delete).status == .ok)
            #expect(try await client.execute(uri: "/v1/session?id=s1", method: .delete).status == .ok)
            // A session body the service's limits refuse never reaches it.
            let bad = try await client.execute(
                uri: "/v1/session", method: .put, headers: Self.json, body: ByteBuffer(string: #"{"volum": 1}"#))
            #expect(bad.status == .unprocessableContent)
        }
        #expect(
            service.calls.map(\.description) == ["putSession hall", "sessions", "endSession hall", "endSession s1"])
    }

    @Test func scheduleRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        let at = Date().addingTimeInterval(3_600).formatted(.iso8601)
        try await withRouter(service) { client in
            let created = try await client.execute(
                uri: "/v1/schedules", method: .post, headers: Self.json,
                body: ByteBuffer(string: #"{"announcement": {"text": "Lunch"}, "at": "\#(at)"}"#))
            #expect(created.status == .created)
            #expect(created.headers[.location] == "/v1/schedules/schedule-1")
            let list = try await client.execute(uri: "/v1/schedules?limit=5", method: .get)
            #expect(list.status == .ok)
            #expect(String(buffer: list.body).contains(#""id":"schedule-1""#))
            #expect(try await client.execute(uri: "/v1/schedules/schedule-1", method: .get).status == .ok)
            let patched = try await client.execute(
                uri: "/v1/schedules/schedule-1", method: .patch,
                headers: [.contentType: "application/merge-patch+json"],
                body: ByteBuffer(string: #"{"paused": true}"#))
            #expect(patched.status == .ok)
            #expect(String(buffer: patched.body).contains(#""paused":true"#))
            #expect(try await client.execute(uri: "/v1/schedules/schedule-1", method: .delete).status == .noContent)
            let gone = try await client.execute(uri: "/v1/schedules/schedule-1", method: .get)
            #expect(gone.status == .notFound)
            // A key given twice is read by the service's strict decoder: 400, and nothing kept.
            let twice = try await client.execute(
                uri: "/v1/schedules", method: .post, headers: Self.json,
                body: ByteBuffer(string: #"{"announcement": {"text": "a"}, "at": "\#(at)", "at": "\#(at)"}"#))
            #expect(twice.status == .badRequest)
            // A page limit out of range never reaches the service.
            let badLimit = try await client.execute(uri: "/v1/schedules?limit=0", method: .get)
            #expect(badLimit.status == .unprocessableContent)
        }
        #expect(
            service.calls.map(\.description) == [
                "createSchedule new", "schedules after= limit=5", "schedule schedule-1", "updateSchedule schedule-1",
                "deleteSchedule schedule-1", "schedule schedule-1",
            ])
    }

    @Test func theAuditRouteCallsTheDoorWithItsQuery() async throws {
        let service = FakeSpeakService()
        try await withRouter(service) { client in
            let page = try await client.execute(
                uri: "/v1/audit?front=http&output=hall&reason=completed&text=gate&after=7&limit=5", method: .get)
            #expect(page.status == .ok)
            let export = try await client.execute(uri: "/v1/audit?format=ndjson", method: .get)
            #expect(export.status == .ok)
            #expect(export.headers[.contentType] == "application/x-ndjson")
            // Checked by the route before the door: a front no row can have, an unknown parameter.
            #expect(try await client.execute(uri: "/v1/audit?front=fax", method: .get).status == .unprocessableContent)
            #expect(try await client.execute(uri: "/v1/audit?colour=red", method: .get).status == .unprocessableContent)
        }
        #expect(
            service.calls.map(\.description) == [
                "audit output=hall reason=completed front=http text=gate after=7 limit=5", "audit limit=500",
            ])
    }

    @Test func statusRoutesCallTheDoor() async throws {
        let service = FakeSpeakService()
        try await withRouter(service) { client in
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
            #expect(
                try WireFormat.decoder().decode(HealthReport.self, from: Data(buffer: health.body)) == service.report)
            #expect(try await client.execute(uri: "/v1/voices", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/v1/clips", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/v1/chimes", method: .get).status == .ok)
            // The fake has no RTP output: its 404 as it gave it.
            let sdp = try await client.execute(uri: "/v1/outputs/hall/sdp", method: .get)
            #expect(sdp.status == .notFound)
            let refusal = try JSONDecoder().decode(ErrorResponse.self, from: Data(buffer: sdp.body))
            #expect(refusal.error.code == ErrorResponse.Code.unknownOutput)
        }
        #expect(service.calls.map(\.description) == ["voices", "clips", "sessionDescription hall"])
    }

    /// Every route that calls the door answers its refusal with the status of its code and the
    /// service's body as it was: the one mapping, whichever method refused.
    @Test(arguments: [
        ("cancel", HTTPRequest.Method.delete, "/v1/announcements/a1", ""),
        ("cancelAll", .delete, "/v1/announcements", ""),
        ("pause", .post, "/v1/announcements/a1/pause", ""),
        ("resume", .post, "/v1/resume", ""),
        ("repeatAnnouncement", .post, "/v1/announcements/a1/repeat", ""),
        ("repeatLast", .post, "/v1/repeat", ""),
        ("putSession", .put, "/v1/session", #"{"rate": 1.5}"#),
        ("endSession", .delete, "/v1/session?output=hall", ""),
        ("schedules", .get, "/v1/schedules", ""),
        ("schedule", .get, "/v1/schedules/s1", ""),
        ("deleteSchedule", .delete, "/v1/schedules/s1", ""),
        ("audit", .get, "/v1/audit", ""),
        ("voices", .get, "/v1/voices", ""),
        ("clips", .get, "/v1/clips", ""),
        ("prerender", .post, "/v1/prerender", #"{"text": "Hi"}"#),
        ("render", .post, "/v1/speech", #"{"text": "Hi"}"#),
    ])
    func aRefusalIsMappedOnceOnEveryRoute(
        _ call: String, _ method: HTTPRequest.Method, _ uri: String, _ body: String
    ) async throws {
        for (code, status) in [
            (SpeakError.Code.conflict, HTTPResponse.Status.conflict), (.stateUnavailable, .serviceUnavailable),
        ] {
            let service = FakeSpeakService()
            let refusal = SpeakError(code, name: "someCode", "refused by the test", field: "id")
            service.refuse(call, with: refusal)
            try await withRouter(service) { client in
                let response = try await client.execute(
                    uri: uri, method: method, headers: body.isEmpty ? [:] : Self.json,
                    body: body.isEmpty ? nil : ByteBuffer(string: body))
                #expect(response.status == status, "\(call)")
                let answer = try JSONDecoder().decode(ErrorResponse.self, from: Data(buffer: response.body))
                #expect(answer == refusal.response, "\(call)")
            }
            #expect(service.calls.map(\.name) == [call])
        }
    }
}
