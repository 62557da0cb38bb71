import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SpeakAPI
import SpeakServer
import SpeechModel
import Testing

struct Harness {
    let scheduler: ScriptedScheduler
    let health = SwitchableHealth()
    let server: SpeakServer

    init(scheduler: ScriptedScheduler = ScriptedScheduler(), settings: ServerSettings = ServerSettings()) {
        self.scheduler = scheduler
        self.server = SpeakServer(scheduler: scheduler, renderer: ToneRenderer(), health: health, settings: settings)
    }

    var app: some ApplicationProtocol {
        Application(router: server.buildRouter())
    }
}

func jsonBody(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    try WireFormat.decoder().decode(type, from: Data(buffer: response.body))
}

@Suite("Routes")
struct RouteTests {
    @Test func postQueuesAnnouncement() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/announcements", method: .post,
                body: jsonBody(#"{"text": "Next train to Lisboa", "language": "en-GB", "priority": "high"}"#))
            #expect(response.status == .accepted)
            #expect(response.headers[.contentType] == WireFormat.jsonContentType)
            let accepted = try decode(AnnouncementAccepted.self, response)
            #expect(accepted.state == .queued)
            #expect(accepted.position == 1)
            #expect(response.headers[.location] == "/v1/announcements/\(accepted.id)")

            let status = try await client.execute(uri: "/v1/announcements/\(accepted.id)", method: .get)
            #expect(status.status == .ok)
            let announcement = try decode(AnnouncementStatus.self, status)
            #expect(announcement.text == "Next train to Lisboa")
            #expect(announcement.priority == .high)
            #expect(announcement.state == .queued)
        }
    }

    @Test func postWithSpansKeepsAttributes() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let body = #"{"spans": [{"text": "Next train to "}, {"text": "Lisboa", "language": "pt-PT", "pitch": 1.2}], "queue": false, "expiresAfter": 30}"#
            let response = try await client.execute(uri: "/v1/announcements", method: .post, body: jsonBody(body))
            #expect(response.status == .accepted)
            let list = try decode(AnnouncementList.self, try await client.execute(uri: "/v1/announcements", method: .get))
            #expect(list.announcements.map(\.text) == ["Next train to Lisboa"])
        }
    }

    @Test(.timeLimit(.minutes(1))) func waitReturnsFinishedEvent() async throws {
        let harness = Harness(scheduler: ScriptedScheduler(finishImmediately: .completed))
        try await harness.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/announcements?wait=true", method: .post, body: jsonBody(#"{"text": "Doors closing"}"#))
            #expect(response.status == .ok)
            let event = try decode(AnnouncementEvent.self, response)
            #expect(event.type == .finished)
            #expect(event.text == "Doors closing")
            #expect(event.success == true)
            #expect(event.reason == .completed)
        }
    }

    @Test(.timeLimit(.minutes(1))) func waitReportsUnsuccessfulFinish() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            async let waited = client.execute(
                uri: "/v1/announcements?wait=1", method: .post, body: jsonBody(#"{"text": "Mind the gap"}"#))
            // Cancel it from a second request once it is queued.
            var id: String?
            while id == nil {
                id = await harness.scheduler.snapshot().first?.id
                if id == nil { try await Task.sleep(for: .milliseconds(5)) }
            }
            let cancel = try await client.execute(uri: "/v1/announcements/\(id!)", method: .delete)
            #expect(try decode(CancelResult.self, cancel).cancelled == [id!])
            let event = try decode(AnnouncementEvent.self, try await waited)
            #expect(event.success == false)
            #expect(event.reason == .cancelled)
        }
    }

    @Test func cancelOneAndAll() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            var ids: [String] = []
            for text in ["one", "two", "three"] {
                let response = try await client.execute(
                    uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "\#(text)"}"#))
                ids.append(try decode(AnnouncementAccepted.self, response).id)
            }
            let one = try await client.execute(uri: "/v1/announcements/\(ids[0])", method: .delete)
            #expect(one.status == .ok)
            #expect(try decode(CancelResult.self, one).cancelled == [ids[0]])
            let again = try await client.execute(uri: "/v1/announcements/\(ids[0])", method: .delete)
            #expect(try decode(CancelResult.self, again).cancelled == [])
            let all = try await client.execute(uri: "/v1/announcements", method: .delete)
            #expect(try decode(CancelResult.self, all).cancelled == [ids[1], ids[2]])
            let finished = try decode(AnnouncementStatus.self, try await client.execute(uri: "/v1/announcements/\(ids[1])", method: .get))
            #expect(finished.state == .finished)
            #expect(finished.reason == .cancelled)
            #expect(finished.success == false)
        }
    }

    @Test func speechRendersWAV() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/speech", method: .post,
                body: jsonBody(#"{"spans": [{"text": "a"}, {"text": "b", "pitch": 0.8}]}"#))
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "audio/wav")
            let bytes = Array(buffer: response.body)
            #expect(bytes.count == 44 + 2 * 2 * ToneRenderer.samplesPerSpan)
            #expect(String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF")
            #expect(String(decoding: bytes[8..<12], as: UTF8.self) == "WAVE")
            let rate = bytes[24..<28].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            #expect(rate == 22_050)
            #expect(await harness.scheduler.snapshotIsEmpty)
        }
    }

    @Test func voicesAreListed() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let response = try await client.execute(uri: "/v1/voices", method: .get)
            #expect(response.status == .ok)
            let voices = try decode(VoiceList.self, response).voices
            #expect(voices.map(\.identifier) == ["gmw/en", "roa/pt"])
            #expect(voices[1].languages.contains("pt-PT"))
        }
    }

    @Test func healthFollowsAudio() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let healthy = try await client.execute(uri: "/healthz", method: .get)
            #expect(healthy.status == .ok)
            let report = try decode(HealthReport.self, healthy)
            #expect(report.status == .ok)
            #expect(report.queue?.capacity == 4)
            harness.health.setAudio(up: false)
            let sick = try await client.execute(uri: "/healthz", method: .get)
            #expect(sick.status == .serviceUnavailable)
            let sickReport = try decode(HealthReport.self, sick)
            #expect(sickReport.audio.state == .unavailable)
            #expect(sickReport.audio.detail == "the sink went away")
        }
    }

    @Test func metricsCountAcceptedRefusedAndFinished() async throws {
        let harness = Harness(scheduler: ScriptedScheduler(capacity: 1))
        try await harness.app.test(.router) { client in
            let accepted = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "one", "priority": "low"}"#))
            let id = try decode(AnnouncementAccepted.self, accepted).id
            let refused = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "two"}"#))
            #expect(refused.status == .tooManyRequests)
            harness.scheduler.finish(id, reason: .interrupted)
            let finishedEvent = try #require(await harness.scheduler.events(after: 1).first { _ in true })
            harness.server.metrics.record(finishedEvent.event)

            let page = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(page.contains("# TYPE speakd_announcements_accepted_total counter"))
            #expect(page.contains(#"speakd_announcements_accepted_total{priority="low"} 1"#))
            #expect(page.contains(#"speakd_announcements_refused_total{reason="queue_full"} 1"#))
            #expect(page.contains(#"speakd_announcements_finished_total{reason="interrupted",success="false"} 1"#))
            #expect(page.contains("speakd_queue_waiting 0"))
            #expect(page.contains(#"speakd_http_responses_total{code="429"} 1"#))
        }
    }

    @Test func corsIsOffByDefault() async throws {
        let harness = Harness()
        try await harness.app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/voices", method: .get, headers: [.origin: "http://kiosk.local"])
            #expect(response.headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test func corsPreflightForKioskOrigin() async throws {
        let harness = Harness(settings: ServerSettings(corsOrigin: "http://kiosk.local:8080"))
        try await harness.app.test(.router) { client in
            let preflight = try await client.execute(
                uri: "/v1/announcements", method: .options,
                headers: [.origin: "http://kiosk.local:8080", .accessControlRequestMethod: "POST"])
            #expect(preflight.status == .noContent || preflight.status == .ok)
            #expect(preflight.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
            let methods = try #require(preflight.headers[.accessControlAllowMethods])
            #expect(methods.contains("POST") && methods.contains("DELETE"))
            #expect(try #require(preflight.headers[.accessControlAllowHeaders]).lowercased().contains("content-type"))

            let post = try await client.execute(
                uri: "/v1/announcements", method: .post, headers: [.origin: "http://kiosk.local:8080"],
                body: jsonBody(#"{"text": "hello"}"#))
            #expect(post.status == .accepted)
            #expect(post.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
            let error = try await client.execute(
                uri: "/v1/announcements/nope", method: .get, headers: [.origin: "http://kiosk.local:8080"])
            #expect(error.status == .notFound)
            #expect(error.headers[.accessControlAllowOrigin] == "http://kiosk.local:8080")
        }
    }
}

extension ScriptedScheduler {
    var snapshotIsEmpty: Bool {
        get async { await snapshot().isEmpty }
    }
}
