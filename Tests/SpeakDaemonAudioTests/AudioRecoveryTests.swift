import Foundation
import SpeakAPI
import SpeakClient
import SpeakDaemon
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

/// The daemon against a real (private) PulseAudio server: what it plays is heard on the null
/// sink's monitor; when the server goes away the announcement fails, health says so, new
/// announcements are refused with 503, and once the server is back the daemon reconnects.
@Suite("Audio recovery", .serialized)
struct AudioRecoveryTests {
    @Test(.timeLimit(.minutes(2))) func pulseLostAndRecovered() async throws {
        let pulse = try await PulseAudioServer.start()
        let pulseDirectory = pulse.directory
        let restarted = Mutex<PulseAudioServer?>(nil)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configuration = testConfiguration(directory, audio: "pulse")

        defer {
            let servers = [pulse] + [restarted.withLock { $0 }].compactMap { $0 }
            Task { for server in servers { await server.stop() } }
        }
        try await withDaemon(configuration, environment: pulse.environment) { daemon, unix, tcp in
            // Heard for real.
            let recorder = try await MonitorRecorder.start(pulse)
            let spoken = try await unix.send(
                "POST", "/v1/announcements?wait=true", json: AnnouncementRequest(utterance: Utterance("Platform four")))
            #expect(try spoken.decode(AnnouncementEvent.self).reason == .completed)
            let samples = await recorder.stop()
            let heard = AudioAnalysis(samples: samples, sampleRate: recorder.sampleRate).soundingDuration()
            #expect(heard > 0.4, "heard \(heard) s")

            // The server goes away mid-announcement.
            let accepted = try await unix.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance(longText)))
            let id = try accepted.decode(AnnouncementAccepted.self).id
            // From the start of the history, so the subscription cannot miss the events.
            var events = unix.events(lastEventID: "0").makeAsyncIterator()
            while let message = try await events.next() {
                if message.event == "started", try message.announcementEvent().id == id { break }
            }
            try await Task.sleep(for: .milliseconds(300))
            await pulse.stop(keepDirectory: true)
            var failed: AnnouncementEvent?
            while let message = try await events.next() {
                let event = try message.announcementEvent()
                if event.type == .finished, event.id == id {
                    failed = event
                    break
                }
            }
            #expect(failed?.success == false)
            #expect(failed?.reason == .failed)

            let sick = try await tcp.send("GET", "/healthz")
            #expect(sick.status == 503)
            let report = try sick.decode(HealthReport.self)
            #expect(report.audio.state == .unavailable)
            #expect(report.audio.detail?.isEmpty == false)
            let refused = try await unix.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance("Anyone there?")))
            #expect(refused.status == 503)
            #expect(refused.error?.error.code == "audioUnavailable")

            // The server comes back on the same socket: the daemon reconnects by itself.
            let server = try await PulseAudioServer.start(directory: pulseDirectory)
            restarted.withLock { $0 = server }
            #expect(try await Self.becomesHealthy(tcp))
            let again = try await unix.send(
                "POST", "/v1/announcements?wait=true", json: AnnouncementRequest(utterance: Utterance("Back again")))
            #expect(again.status == 200)
            #expect(try again.decode(AnnouncementEvent.self).reason == .completed)
        }
    }

    /// No sound server when the daemon starts: it starts anyway, reports 503, and picks the
    /// server up once it appears.
    @Test(.timeLimit(.minutes(2))) func pulseMissingAtStart() async throws {
        let pulseDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-pulse-\(UUID().uuidString.prefix(8))")
        let started = Mutex<PulseAudioServer?>(nil)
        defer {
            let server = started.withLock { $0 }
            Task { await server?.stop() }
        }
        PulseAudioServer.useClientConfigInThisProcess()
        let environment = ["PULSE_SERVER": "unix:\(pulseDirectory.path)/native"]
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withDaemon(testConfiguration(directory, audio: "pulse"), environment: environment) { _, unix, tcp in
            let sick = try await tcp.send("GET", "/healthz")
            #expect(sick.status == 503)
            #expect(try sick.decode(HealthReport.self).audio.sink == "pulse")
            let refused = try await unix.send(
                "POST", "/v1/announcements", json: AnnouncementRequest(utterance: Utterance("Too early")))
            #expect(refused.status == 503)

            let server = try await PulseAudioServer.start(directory: pulseDirectory)
            started.withLock { $0 = server }
            #expect(try await Self.becomesHealthy(tcp))
            let spoken = try await unix.send(
                "POST", "/v1/announcements?wait=true", json: AnnouncementRequest(utterance: Utterance("Now it works")))
            #expect(try spoken.decode(AnnouncementEvent.self).reason == .completed)
        }
    }

    /// Polls `/healthz` until it answers 200, for up to 20 s; true when it did.
    private static func becomesHealthy(_ tcp: SpeakHTTPClient) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            if try await tcp.send("GET", "/healthz").status == 200 { return true }
        }
        return false
    }
}
