import AudioOutput
import Foundation
import SpeakAPI
import SpeakClient
import SpeakDaemon
import SpeakTestSupport
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
        // The fleet hears the changes too: a real broker, and mosquitto_sub on the kiosk's events topic.
        let broker = try await MosquittoBroker.start()
        configuration.mqtt = broker.url
        configuration.mqttID = "k1"
        configuration.mqttSite = "bank"
        let received = directory.appendingPathComponent("mqtt.txt").path
        let subscriber = try ChildProcess(
            "/usr/bin/stdbuf",
            [
                "-oL", "/usr/bin/mosquitto_sub", "-d", "-V", "mqttv5", "-h", "127.0.0.1", "-p", "\(broker.port)", "-t",
                "speakd/bank/device/k1/events",
            ],
            environment: [:], output: received)
        defer {
            subscriber.send(SIGKILL)
            _ = subscriber.exitStatus
        }
        // Subscribed before anything is published (`-d` prints the broker's SUBACK, line-buffered
        // by stdbuf; the reports are the lines that are JSON).
        let subscribed = ContinuousClock.now + .seconds(10)
        while !((try? String(contentsOfFile: received, encoding: .utf8)) ?? "").contains("SUBACK") {
            guard ContinuousClock.now < subscribed else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(20))
        }
        try await withDaemon(configuration) { daemon, unix, _ in
            while try await unix.send("GET", "/healthz").decode(HealthReport.self).mqtt?.state != .connected {
                try await Task.sleep(for: .milliseconds(20))
            }
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
            // A session that moves the hall's announcements to the headset, privately.
            let session = try await unix.send(
                "PUT", "/v1/session", json: SessionRequest(moveTo: .some("headset"), isPrivate: .some(true)))
            #expect(session.status == 201, "\(String(decoding: session.body, as: UTF8.self))")

            headset.update(false)
            let unplugged = try await nextEvent(.headset)
            #expect(unplugged.output == "headset" && unplugged.present == false && unplugged.id.isEmpty)
            // Its move and privacy wait while the headphones are out.
            let waiting = try await nextEvent(.session)
            #expect(waiting.session?.change == .changed && waiting.session?.session.headsetOut == true)
            #expect(try await output()?.headset == .absent)

            let body = AnnouncementRequest(utterance: Utterance(longText))
            var privateBody = body
            privateBody.delivery.isPrivate = true
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
            let resumed = try await nextEvent(.session)
            #expect(resumed.session?.session.headsetOut == nil && resumed.session?.session.isPrivate == true)
            #expect(try await output()?.headset == .present)
            privateBody.utterance = Utterance("Your code is ready")
            let heard = try await unix.send("POST", "/v1/announcements?wait=true", json: privateBody)
                .decode(AnnouncementEvent.self)
            #expect(heard.reason == .completed && heard.output == "headset")

            // Both changes reached the fleet as `headset` reports, in order.
            var reports: [FleetReport] = []
            let deadline = ContinuousClock.now + .seconds(10)
            while reports.filter({ $0.type == .headset }).count < 2, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                let lines = (try? String(contentsOfFile: received, encoding: .utf8)) ?? ""
                reports = lines.split(separator: "\n").compactMap {
                    try? WireFormat.decoder().decode(FleetReport.self, from: Data($0.utf8))
                }
            }
            let headsetReports = reports.filter { $0.type == .headset }
            #expect(headsetReports.map { $0.event?.present } == [false, true], "\(reports)")
            #expect(headsetReports.allSatisfy { $0.event?.output == "headset" })
        }
        await broker.stop()
    }
}
