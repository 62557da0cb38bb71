import Foundation
import Logging
import SpeakAPI
import SpeakClient
import SpeakDaemon
import SpeakServer
import SpeakTestSupport
import SpeechModel
import Testing

/// A configuration for tests: a socket in `directory`, TCP on a free loopback port, `audio`.
func testConfiguration(_ directory: URL, audio: String = "null") -> DaemonConfiguration {
    var configuration = DaemonConfiguration.defaults(environment: [:])
    configuration.socketPath = directory.appendingPathComponent("speakd.sock").path
    configuration.tokenFile = directory.appendingPathComponent(AccessToken.fileName).path
    configuration.http = .tcp(host: "127.0.0.1", port: 0)
    configuration.audio = audio
    configuration.heartbeatSeconds = 0.2
    return configuration
}

/// Builds and runs a daemon (with the sink `makeSink` makes, if given) until `body` returns, then shuts it down and checks it stopped.
func withDaemon(
    _ configuration: DaemonConfiguration, environment: [String: String] = [:],
    makeSink: AudioSupervisor.MakeSink? = nil,
    _ body: @Sendable (Daemon, SpeakHTTPClient, SpeakHTTPClient) async throws -> Void
) async throws {
    let daemon = try await buildDaemon(
        configuration, environment: environment, logger: Logger(label: "speakd-test"), gracefulShutdownSignals: [],
        makeSink: makeSink)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await daemon.run() }
        let bound = try await daemon.waitUntilReady()
        guard case .unixSocket(let path) = bound[0], case .tcp(let host, let port) = bound[1] else {
            Issue.record("unexpected listeners \(bound)")
            return
        }
        let unix = SpeakHTTPClient(endpoint: .unixSocket(path: path), timeout: .seconds(20))
        let token = configuration.needsToken ? try AccessToken.read(from: configuration.tokenFile) : nil
        let tcp = SpeakHTTPClient(endpoint: .tcp(host: host, port: port), timeout: .seconds(20), token: token)
        do {
            try await body(daemon, unix, tcp)
        } catch {
            await daemon.shutdown()
            throw error
        }
        await daemon.shutdown()
        try await group.waitForAll()
    }
}

/// A text that takes several seconds to speak.
let longText =
    "This is a long announcement for the passengers waiting on platform four, "
    + "the train to Lisboa Santa Apolónia is delayed by about twenty minutes, we apologise for the inconvenience."

@Suite("Daemon", .serialized)
struct DaemonTests {
    /// The whole path with the real engine and the real null sink (paced like a device).
    @Test(.timeLimit(.minutes(1))) func speaksAndReportsFinished() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = testConfiguration(directory)
        try await withDaemon(configuration) { daemon, unix, tcp in
            var events = unix.events(lastEventID: "0").makeAsyncIterator()
            let started = ContinuousClock.now
            let response = try await unix.send(
                "POST", "/v1/announcements?wait=true",
                json: AnnouncementRequest(
                    utterance: Utterance(
                        "Next train to Lisboa", defaults: SpeechAttributes(language: try LanguageTag("en-GB")))))
            #expect(response.status == 200)
            let finished = try response.decode(AnnouncementEvent.self)
            #expect(finished.type == .finished)
            #expect(finished.success == true)
            #expect(finished.reason == .completed)
            #expect(finished.voice == "gmw/en")
            // The null sink plays in real time: finishing takes about as long as the speech.
            #expect(ContinuousClock.now - started > .milliseconds(700))

            var seen: [String] = []
            while let message = try await events.next() {
                // Word and sentence events come between: the lifecycle is what is checked here.
                if ["word", "sentence", "mark"].contains(message.event) { continue }
                seen.append(message.event ?? "")
                if message.event == "finished" {
                    #expect(try message.announcementEvent().id == finished.id)
                    break
                }
            }
            #expect(seen == ["queued", "started", "finished"])

            let health = try await tcp.send("GET", "/healthz")
            #expect(health.status == 200)
            let report = try health.decode(HealthReport.self)
            #expect(report.engine.name == "espeak-ng")
            #expect(report.audio == HealthReport.Audio(state: .ok, sink: "null"))

            let voices = try await tcp.send("GET", "/v1/voices").decode(VoiceList.self)
            #expect(voices.voices.contains { $0.languages.contains("pt-PT") })

            let wav = try await tcp.send(
                "POST", "/v1/speech",
                json: AnnouncementRequest(
                    utterance: Utterance("Olá", defaults: SpeechAttributes(language: try LanguageTag("pt-PT")))))
            #expect(wav.status == 200)
            #expect(wav.header("content-type") == "audio/wav")
            #expect(wav.body.count > 44 + 22_050 / 5)

            let unknown = try await unix.send(
                "POST", "/v1/announcements",
                json: AnnouncementRequest(
                    utterance: Utterance("x", defaults: SpeechAttributes(language: try LanguageTag("xx")))))
            #expect(unknown.status == 422)
            #expect(unknown.error?.error.field == "language")

            let metrics = String(decoding: try await tcp.send("GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains(#"speakd_announcements_finished_total{reason="completed",success="true"} 1"#))
        }
        #expect(!FileManager.default.fileExists(atPath: configuration.socketPath!))
    }

    /// Graceful shutdown: listeners close, the speaking and every waiting announcement finish
    /// with `shutdown`, event streams get those events and end, the socket is removed.
    @Test(.timeLimit(.minutes(1))) func shutdownFinishesEverythingWithShutdown() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = testConfiguration(directory)
        let daemon = try await buildDaemon(configuration, environment: [:], gracefulShutdownSignals: [])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await daemon.run() }
            _ = try await daemon.waitUntilReady()
            let client = SpeakHTTPClient(endpoint: .unixSocket(path: configuration.socketPath!), timeout: .seconds(20))
            var events = client.events(lastEventID: "0").makeAsyncIterator()
            var ids: [String] = []
            for priority in [AnnouncementPriority.default, .low, .high] {
                let accepted = try await client.send(
                    "POST", "/v1/announcements",
                    json: AnnouncementRequest(utterance: Utterance(longText), priority: priority))
                ids.append(try accepted.decode(AnnouncementAccepted.self).id)
            }
            // A client waiting for its announcement gets the `shutdown` finish too.
            async let waited = client.send(
                "POST", "/v1/announcements?wait=true",
                json: AnnouncementRequest(utterance: Utterance("waiting client"), priority: .low))
            // "high" interrupts the first; wait until it speaks and the waiting client is queued.
            var finished: [String: FinishReason] = [:]
            var highStarted = false
            var clientQueued = false
            while !(highStarted && clientQueued), let message = try await events.next() {
                let event = try message.announcementEvent()
                if event.type == .finished { finished[event.id] = event.reason }
                if event.type == .started, event.id == ids[2] { highStarted = true }
                if event.type == .queued, event.text == "waiting client" { clientQueued = true }
            }
            let stopping = ContinuousClock.now
            await daemon.shutdown()
            while let message = try await events.next() {
                let event = try message.announcementEvent()
                if event.type == .finished { finished[event.id] = event.reason }
            }
            let waitedEvent = try await waited.decode(AnnouncementEvent.self)
            #expect(waitedEvent.text == "waiting client")
            #expect(waitedEvent.reason == .shutdown)
            #expect(waitedEvent.success == false)
            try await group.waitForAll()
            #expect(ContinuousClock.now - stopping < .seconds(5))
            finished[waitedEvent.id] = nil
            #expect(finished == [ids[0]: .interrupted, ids[1]: .shutdown, ids[2]: .shutdown])
        }
        #expect(!FileManager.default.fileExists(atPath: configuration.socketPath!))
        await #expect(throws: SpeakClientError.self) {
            _ = try await SpeakHTTPClient(endpoint: .unixSocket(path: configuration.socketPath!)).send(
                "GET", "/healthz")
        }
    }
}

@Suite("Daemon voices", .serialized)
struct DaemonVoicesTests {
    static let voicesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Voices").path

    /// `--voices` with the project's directory: its overrides pick the voice, and a fallback
    /// language turns an unknown language into that language instead of an error.
    @Test(.timeLimit(.minutes(1))) func voicesDirectoryAndFallback() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = testConfiguration(directory)
        configuration.voicesDirectory = Self.voicesDirectory
        configuration.fallbackLanguage = "en-GB"
        // The engine builds its data overlay under RUNTIME_DIRECTORY: one of its own per test run.
        try await withDaemon(configuration, environment: ["RUNTIME_DIRECTORY": directory.path]) { _, unix, _ in
            let argentina = try await unix.send(
                "POST", "/v1/announcements?wait=true",
                json: AnnouncementRequest(
                    utterance: Utterance("Hola", defaults: SpeechAttributes(language: try LanguageTag("es-AR")))))
            #expect(try argentina.decode(AnnouncementEvent.self).voice?.hasPrefix("roa/es-419") == true)
            let unknown = try await unix.send(
                "POST", "/v1/announcements?wait=true",
                json: AnnouncementRequest(
                    utterance: Utterance("Hello", defaults: SpeechAttributes(language: try LanguageTag("xx")))))
            #expect(unknown.status == 200)
            #expect(try unknown.decode(AnnouncementEvent.self).voice?.hasPrefix("gmw/en") == true)
        }
    }

    /// `GET /v1/voices` lists the tags that reach each voice after the overrides, not espeak-ng's own.
    @Test(.timeLimit(.minutes(1))) func voicesListTheTagsThatReachThem() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = testConfiguration(directory)
        configuration.voicesDirectory = Self.voicesDirectory
        try await withDaemon(configuration, environment: ["RUNTIME_DIRECTORY": directory.path]) { _, unix, _ in
            let voices = try await unix.send("GET", "/v1/voices").decode(VoiceList.self).voices
            func serving(_ tag: String) -> [String] {
                voices.filter { $0.languages.contains(tag) }.map(\.identifier)
            }
            #expect(serving("nn") == ["gmq/nb"])
            #expect(serving("zh-HK") == ["sit/yue"])
            #expect(serving("pt") == ["roa/pt-BR"])
            #expect(serving("pt-PT") == ["roa/pt"])
            #expect(serving("en") == ["gmw/en-US"])
            #expect(serving("es-AR") == ["roa/es-419"])
            let tags = voices.flatMap(\.languages)
            #expect(Set(tags).count == tags.count, "a tag is listed under two voices")
        }
    }

    /// speakd's own ducking lowers streams through a sound server: with no output on one it has
    /// nothing to act on, and says so rather than start and do nothing.
    @Test func duckingWithoutASoundServerIsAStartError() async throws {
        var configuration = testConfiguration(URL(fileURLWithPath: "/tmp"), audio: "null")
        configuration.duckRoles = ["music"]
        await #expect {
            _ = try await buildDaemon(configuration, environment: [:], gracefulShutdownSignals: [])
        } throws: { error in
            "\(error)".contains("--duck: no output plays through a sound server")
        }
    }

    @Test func missingVoicesDirectoryIsAStartError() async throws {
        var configuration = testConfiguration(URL(fileURLWithPath: "/tmp"))
        configuration.voicesDirectory = "/nonexistent/voices"
        await #expect(throws: DaemonStartError.self) {
            _ = try await buildDaemon(configuration, environment: [:], gracefulShutdownSignals: [])
        }
    }
}

@Suite("Daemon lead-in", .serialized)
struct DaemonLeadInTests {
    /// Leading zero samples of a WAV file written by the `wav:` sink.
    static func leadingSilence(_ path: String) throws -> Int {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var count = 0
        var offset = 44
        while offset + 1 < bytes.count, bytes[offset] == 0, bytes[offset + 1] == 0 {
            count += 1
            offset += 2
        }
        return count
    }

    /// SSML paragraphs reach the engine workers as paragraphs: the sink hears the pause between them.
    @Test(.timeLimit(.minutes(1))) func ssmlParagraphsArePausedThroughTheWorkers() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let wav = directory.appendingPathComponent("out.wav").path
        try await withDaemon(testConfiguration(directory, audio: "wav:\(wav)")) { _, unix, _ in
            let response = try await unix.send(
                "POST", "/v1/announcements?wait=true",
                json: AnnouncementRequest(
                    utterance: try Utterance(ssml: "<speak><p>Please wait here</p><p>The train is coming</p></speak>")))
            #expect(try response.decode(AnnouncementEvent.self).reason == .completed)
        }
        let file = try WAVReader(contentsOf: URL(fileURLWithPath: wav))
        let heard = AudioAnalysis(samples: file.samples, sampleRate: file.sampleRate)
        // espeak-ng's own paragraph pause is 0.59 s at the normal rate; a run-on sentence has none over 0.25 s.
        #expect(heard.longestInnerSilence() > 0.45 && heard.longestInnerSilence() < 0.9, "\(heard.soundingSegments())")
    }

    /// `--lead-in` puts that much silence before the speech, on a real (WAV file) sink.
    @Test(.timeLimit(.minutes(1))) func leadInPrecedesSpeech() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var silences: [Int] = []
        for (index, leadIn) in [0.0, 0.3].enumerated() {
            let wav = directory.appendingPathComponent("out\(index).wav").path
            var configuration = testConfiguration(directory, audio: "wav:\(wav)")
            configuration.leadInSeconds = leadIn
            try await withDaemon(configuration) { _, unix, _ in
                let response = try await unix.send(
                    "POST", "/v1/announcements?wait=true",
                    json: AnnouncementRequest(utterance: Utterance("Platform four")))
                #expect(try response.decode(AnnouncementEvent.self).reason == .completed)
            }
            silences.append(try Self.leadingSilence(wav))
        }
        let added = Double(silences[1] - silences[0]) / 22_050
        #expect(abs(added - 0.3) < 0.01, "\(silences)")
    }
}
