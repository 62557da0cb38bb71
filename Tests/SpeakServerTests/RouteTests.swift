import AnnouncementIntake
import AnnouncementQueue
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IntakeTestSupport
import ServiceCore
import SpeakAPI
import SpeakServer
import SpeakService
import SpeakTestSupport
import SpeechModel
import Testing

struct Harness {
    let running: RunningQueue
    let health = SwitchableHealth()
    let renderer = FakeRenderer.tone()
    let server: SpeakServer

    init(
        capacity: Int = 4, autoComplete: Bool = false, limits: ServiceLimits = ServiceLimits(),
        settings: ServerSettings = ServerSettings(), renderLimits: RenderLimits = RenderLimits(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        running = RunningQueue(capacity: capacity, autoComplete: autoComplete)
        let metrics = SpeakMetrics()
        let intake = AnnouncementIntake(
            outputs: AnnouncementOutputs(single: running.queue), renderer: renderer, health: health, limits: limits,
            counters: metrics.serviceCounters)
        server = SpeakServer(
            service: CoreService(intake: intake, health: health, renderLimits: renderLimits), settings: settings,
            metrics: metrics, now: now)
    }

    var app: some ApplicationProtocol {
        Application(router: server.buildRouter())
    }

    /// Runs `body` against the router with a running queue, then shuts the queue down. The
    /// client declares bodies `application/json` unless told otherwise (`JSONClient`); `raw`
    /// leaves requests as written, for the tests of the access rules.
    func test(
        listener: SpeakEndpoint = .tcp(host: "127.0.0.1", port: 0), raw: Bool = false,
        _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        try await running.waitUntilRunning()
        do {
            try await Application(router: server.buildRouter(for: listener)).test(.router) { client in
                try await body(raw ? client : JSONClient(base: client))
            }
        } catch {
            await running.shutdown()
            throw error
        }
        await running.shutdown()
    }

    /// Posts `json` to `/v1/announcements` and returns the accepted id.
    func post(_ client: some TestClientProtocol, _ json: String) async throws -> String {
        let response = try await client.execute(uri: "/v1/announcements", method: .post, body: jsonBody(json))
        #expect(response.status == .accepted)
        return try decode(AnnouncementAccepted.self, response).id
    }
}

func jsonBody(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

/// A test client that sends what every well-behaved client sends: `Content-Type: application/json`
/// on a request with a body that names no type.
struct JSONClient: TestClientProtocol {
    let base: any TestClientProtocol

    var port: Int? { base.port }

    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?)
        async throws -> TestResponse
    {
        var headers = headers
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        return try await base.executeRequest(uri: uri, method: method, headers: headers, body: body)
    }
}

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    try WireFormat.decoder().decode(type, from: Data(buffer: response.body))
}

@Suite("Routes")
struct RouteTests {
    @Test(.timeLimit(.minutes(1))) func postQueuesAnnouncement() async throws {
        let harness = Harness()
        try await harness.test { client in
            let first = try await client.execute(
                uri: "/v1/announcements", method: .post,
                body: jsonBody(#"{"text": "Next train to Lisboa", "language": "en-GB", "priority": "high"}"#))
            #expect(first.status == .accepted)
            #expect(first.headers[.contentType] == WireFormat.jsonContentType)
            let speaking = try decode(AnnouncementAccepted.self, first)
            #expect(speaking.state == .speaking)
            #expect(speaking.position == 0)
            #expect(first.headers[.location] == "/v1/announcements/\(speaking.id)")

            let second = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "Platform 4", "priority": "low"}"#))
            let waiting = try decode(AnnouncementAccepted.self, second)
            #expect(waiting.state == .queued)
            #expect(waiting.position == 1)

            let status = try await client.execute(uri: "/v1/announcements/\(speaking.id)", method: .get)
            #expect(status.status == .ok)
            let announcement = try decode(AnnouncementStatus.self, status)
            #expect(announcement.text == "Next train to Lisboa")
            #expect(announcement.priority == .high)
            #expect(announcement.state == .speaking)

            let list = try decode(
                AnnouncementList.self, try await client.execute(uri: "/v1/announcements", method: .get))
            #expect(list.announcements.map(\.id) == [speaking.id, waiting.id])
            #expect(list.announcements.map(\.state) == [.speaking, .queued])
        }
    }

    @Test(.timeLimit(.minutes(1))) func postWithSpansKeepsText() async throws {
        let harness = Harness()
        try await harness.test { client in
            let body =
                #"{"spans": [{"text": "Next train to "}, {"text": "Lisboa", "language": "pt-PT", "pitch": 1.2}], "queue": false, "expiresAfter": 30}"#
            _ = try await harness.post(client, body)
            let list = try decode(
                AnnouncementList.self, try await client.execute(uri: "/v1/announcements", method: .get))
            #expect(list.announcements.map(\.text) == ["Next train to Lisboa"])
        }
    }

    @Test(.timeLimit(.minutes(1))) func waitReturnsFinishedEvent() async throws {
        let harness = Harness(autoComplete: true)
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/announcements?wait=true", method: .post, body: jsonBody(#"{"text": "Doors closing"}"#))
            #expect(response.status == .ok)
            let event = try decode(AnnouncementEvent.self, response)
            #expect(event.type == .finished)
            #expect(event.text == "Doors closing")
            #expect(event.success == true)
            #expect(event.reason == .completed)
            #expect(event.voice == "tone")
        }
    }

    @Test(.timeLimit(.minutes(1))) func waitReportsUnsuccessfulFinish() async throws {
        let harness = Harness()
        try await harness.test { client in
            async let waited = client.execute(
                uri: "/v1/announcements?wait=1", method: .post, body: jsonBody(#"{"text": "Mind the gap"}"#))
            try await harness.running.waitUntilSpoken(1)
            let id = harness.running.speaker.spoken[0]
            let cancel = try await client.execute(uri: "/v1/announcements/\(id)", method: .delete)
            #expect(try decode(CancelResult.self, cancel).cancelled == 1)
            let event = try decode(AnnouncementEvent.self, try await waited)
            #expect(event.id == id)
            #expect(event.success == false)
            #expect(event.reason == .cancelled)
        }
    }

    @Test(.timeLimit(.minutes(1))) func cancelOneAndAll() async throws {
        let harness = Harness()
        try await harness.test { client in
            var ids: [String] = []
            for text in ["one", "two", "three"] {
                ids.append(try await harness.post(client, #"{"text": "\#(text)"}"#))
            }
            let one = try await client.execute(uri: "/v1/announcements/\(ids[1])", method: .delete)
            #expect(one.status == .ok)
            #expect(try decode(CancelResult.self, one).cancelled == 1)
            let again = try await client.execute(uri: "/v1/announcements/\(ids[1])", method: .delete)
            #expect(again.status == .ok)
            #expect(try decode(CancelResult.self, again).cancelled == 0)
            let all = try await client.execute(uri: "/v1/announcements", method: .delete)
            #expect(try decode(CancelResult.self, all).cancelled == 2)
            for id in ids {
                let finished = try decode(
                    AnnouncementStatus.self, try await client.execute(uri: "/v1/announcements/\(id)", method: .get))
                #expect(finished.state == .finished)
                #expect(finished.reason == .cancelled)
                #expect(finished.success == false)
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func speechRendersWAVWithoutQueueing() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/speech", method: .post,
                body: jsonBody(#"{"spans": [{"text": "a"}, {"text": "b", "pitch": 0.8}]}"#))
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "audio/wav")
            let bytes = Array(buffer: response.body)
            #expect(bytes.count == 44 + 2 * 2 * FakeRenderer.toneSamplesPerSpan)
            #expect(String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF")
            #expect(String(decoding: bytes[8..<12], as: UTF8.self) == "WAVE")
            let rate = bytes[24..<28].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            #expect(rate == 22_050)
            #expect(await harness.running.queue.snapshot().isEmpty)
            #expect(harness.running.speaker.spoken.isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(1))) func anAnnouncementIsPreparedOnceAndSpokenAsPrepared() async throws {
        let harness = Harness(autoComplete: true)
        try await harness.test { client in
            let body = #"{"spans": [{"text": "Next train to "}, {"text": "Lisboa", "language": "pt-PT"}]}"#
            let response = try await client.execute(
                uri: "/v1/announcements?wait=true", method: .post, body: jsonBody(body))
            #expect(response.status == .ok)
            #expect(try decode(AnnouncementEvent.self, response).voice == "tone")
            // Validated and compiled once, where it was accepted; the speaker was handed that
            // very preparation (serial 1), not the utterance to compile again.
            #expect(harness.renderer.counts.prepared == 1)
            let spoken = harness.running.speaker.speeches
            #expect(spoken.count == 1)
            #expect(try spoken.first?.input(as: Int.self) == 1)
            #expect(spoken.first?.utterance.text == "Next train to Lisboa")

            // A refused one is prepared once and goes no further.
            let refused = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "x", "language": "xx"}"#))
            #expect(refused.status == .unprocessableContent)
            #expect(harness.renderer.counts.prepared == 2)
            #expect(harness.running.speaker.speeches.count == 1)

            // POST /v1/speech renders the preparation it made, once.
            let speech = try await client.execute(uri: "/v1/speech", method: .post, body: jsonBody(body))
            #expect(speech.status == .ok)
            #expect(harness.renderer.counts.prepared == 3)
            #expect(harness.renderer.counts.rendered == [3])
        }
    }

    @Test(.timeLimit(.minutes(1))) func voicesAreListed() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(uri: "/v1/voices", method: .get)
            #expect(response.status == .ok)
            let voices = try decode(VoiceList.self, response).voices
            #expect(voices.map(\.identifier) == ["gmw/en", "roa/pt"])
            #expect(voices[1].languages.contains("pt-PT"))
        }
    }

    @Test(.timeLimit(.minutes(1))) func healthFollowsAudio() async throws {
        let harness = Harness()
        try await harness.test { client in
            _ = try await harness.post(client, #"{"text": "one"}"#)
            _ = try await harness.post(client, #"{"text": "two"}"#)
            let healthy = try await client.execute(uri: "/healthz", method: .get)
            #expect(healthy.status == .ok)
            let report = try decode(HealthReport.self, healthy)
            #expect(report.status == .ok)
            #expect(report.queue == HealthReport.Queue(waiting: 1, speaking: true, capacity: 4))
            harness.health.setAudio(up: false)
            let sick = try await client.execute(uri: "/healthz", method: .get)
            #expect(sick.status == .serviceUnavailable)
            let sickReport = try decode(HealthReport.self, sick)
            #expect(sickReport.status == .unavailable)
            #expect(sickReport.audio.state == .unavailable)
            #expect(sickReport.audio.detail == "the sink went away")
        }
    }

    @Test(.timeLimit(.minutes(1))) func metricsCountAcceptedRefusedAndFinished() async throws {
        let harness = Harness(capacity: 1)
        try await harness.test { client in
            let observer = Task {
                await harness.server.metrics.observe(harness.running.queue.events(after: 0))
            }
            defer { observer.cancel() }
            let first = try await harness.post(client, #"{"text": "one", "priority": "low"}"#)
            _ = try await harness.post(client, #"{"text": "two", "priority": "low"}"#)
            let refused = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "three", "priority": "low"}"#))
            #expect(refused.status == .tooManyRequests)
            _ = try await harness.post(client, #"{"text": "four", "priority": "high"}"#)
            // "four" interrupted "one" and displaced "two": wait for both finished events to be counted.
            var page = ""
            while !page.contains(#"speakd_announcements_finished_total{reason="discarded",success="false"} 1"#)
                || !page.contains(#"speakd_announcements_finished_total{reason="interrupted",success="false"} 1"#)
            {
                try await Task.sleep(for: .milliseconds(5))
                page = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            }
            #expect(page.contains("# TYPE speakd_announcements_accepted_total counter"))
            #expect(page.contains(#"speakd_announcements_accepted_total{priority="low"} 2"#))
            #expect(page.contains(#"speakd_announcements_accepted_total{priority="high"} 1"#))
            #expect(page.contains(#"speakd_announcements_refused_total{reason="queue_full"} 1"#))
            #expect(page.contains("speakd_queue_speaking 1"))
            #expect(page.contains("speakd_queue_capacity 1"))
            #expect(page.contains(#"speakd_http_responses_total{code="429"} 1"#))
            #expect(page.contains(#"speakd_audio_up{sink="null"} 1"#))
            #expect(await harness.running.queue.status(id: first)?.reason == .interrupted)
        }
    }

    @Test(.timeLimit(.minutes(1))) func corsIsOffByDefault() async throws {
        let harness = Harness()
        try await harness.test { client in
            let response = try await client.execute(
                uri: "/v1/voices", method: .get, headers: [.origin: "http://kiosk.local"])
            #expect(response.headers[.accessControlAllowOrigin] == nil)
            // Without a configured origin, no web page may call at all.
            #expect(response.status == .forbidden)
        }
    }

    @Test(.timeLimit(.minutes(1))) func corsPreflightForKioskOrigin() async throws {
        let harness = Harness(settings: ServerSettings(corsOrigin: "http://kiosk.local:8080"))
        try await harness.test { client in
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

@Suite("Routes over a live server")
struct LiveRouteTests {
    /// The same routes through Hummingbird's live test framework (a real TCP server and client).
    @Test(.timeLimit(.minutes(1))) func postListCancelOverLiveServer() async throws {
        let harness = Harness(autoComplete: false)
        try await harness.running.waitUntilRunning()
        do {
            try await harness.app.test(.live) { client in
                let client = JSONClient(base: client)
                #expect(client.port != nil)
                let id = try await harness.post(client, #"{"text": "live framework"}"#)
                let list = try decode(
                    AnnouncementList.self, try await client.execute(uri: "/v1/announcements", method: .get))
                #expect(list.announcements.map(\.id) == [id])
                let cancelled = try await client.execute(uri: "/v1/announcements", method: .delete)
                #expect(try decode(CancelResult.self, cancelled).cancelled == 1)
                let bad = try await client.execute(
                    uri: "/v1/announcements", method: .post, body: jsonBody(#"{"text": "x", "pitch": 9}"#))
                #expect(bad.status == .unprocessableContent)
                #expect(try decode(ErrorResponse.self, bad).error.field == "pitch")
            }
        } catch {
            await harness.running.shutdown()
            throw error
        }
        await harness.running.shutdown()
    }
}
