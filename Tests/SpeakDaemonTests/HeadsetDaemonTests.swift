import AudioOutput
import Foundation
import SpeakAPI
import SpeakClient
import SpeakDaemon
import SpeechModel
import Testing

/// A private output's headphone presence through the whole daemon (real engine, null sinks).
/// The null sink has no ports, so the test drives the output's `HeadsetPresence` itself, as the
/// PulseAudio monitor does on a sink with jack detection.
@Suite("Daemon headset", .serialized)
struct HeadsetDaemonTests {
    @Test(.timeLimit(.minutes(1)))
    func unpluggedFailsPrivateAnnouncementsAtOnceAndEveryChangeIsAnEvent() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = testConfiguration(directory)
        configuration.outputs = [NamedOutput(name: "headset", sink: "null", isPrivate: true)]
        try await withDaemon(configuration) { daemon, unix, _ in
            let headset = try #require(daemon.headsets["headset"])
            #expect(daemon.headsets.count == 1, "only private outputs have a presence")
            var events = unix.events(lastEventID: nil).makeAsyncIterator()
            try await Task.sleep(for: .milliseconds(200))
            func nextEvent(_ type: AnnouncementEvent.Kind) async throws -> AnnouncementEvent {
                while let message = try await events.next() {
                    let event = try message.announcementEvent()
                    if event.type == type { return event }
                }
                throw CancellationError()
            }
            func output() async throws -> HealthReport.Output? {
                try await unix.send("GET", "/healthz").decode(HealthReport.self).outputs?.first { $0.name == "headset" }
            }
            #expect(try await output()?.headset == .unknown)
            #expect(try await output()?.private == true)

            headset.update(false)
            let unplugged = try await nextEvent(.headset)
            #expect(unplugged.output == "headset" && unplugged.present == false && unplugged.id.isEmpty)
            #expect(try await output()?.headset == .absent)

            let body = AnnouncementRequest(utterance: Utterance(longText))
            var privateBody = body
            privateBody.isPrivate = true
            let began = ContinuousClock.now
            let failed = try await unix.send("POST", "/v1/announcements?wait=true", json: privateBody)
                .decode(AnnouncementEvent.self)
            #expect(failed.reason == .failed)
            #expect(failed.detail?.contains("no headset is plugged into output 'headset'") == true, "\(failed)")
            #expect(ContinuousClock.now - began < .milliseconds(500), "it did not fail at once")
            // An announcement that is not private still plays there.
            var publicBody = AnnouncementRequest(utterance: Utterance("Thank you"))
            publicBody.output = "headset"
            let spoken = try await unix.send("POST", "/v1/announcements?wait=true", json: publicBody)
                .decode(AnnouncementEvent.self)
            #expect(spoken.reason == .completed)

            headset.update(true)
            let plugged = try await nextEvent(.headset)
            #expect(plugged.present == true)
            #expect(try await output()?.headset == .present)
            privateBody.utterance = Utterance("Your code is ready")
            let heard = try await unix.send("POST", "/v1/announcements?wait=true", json: privateBody)
                .decode(AnnouncementEvent.self)
            #expect(heard.reason == .completed && heard.output == "headset")
        }
    }
}
