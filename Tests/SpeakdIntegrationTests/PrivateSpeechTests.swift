import Foundation
import SpeakAPI
import SpeakFleet
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Private announcements through two null sinks of one private PulseAudio server, `hall`
    /// (`default`) and `headset` (`--output headset=pulse:headset,private`), both recorded, with a
    /// real mosquitto broker: heard on the headset only, and their text nowhere but to their poster.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct PrivateSpeechTests {
        static let site = "bank"
        /// A word that appears in nothing speakd says unless a private text leaks.
        static let secret = "Quetzalcoatl"

        @Test("a private announcement is heard on the headset only; its text is in no log, metric, event or listing")
        func heardOnTheHeadsetOnlyAndNeverShown() async throws {
            let pulse = try await PulseAudioServer.start(sinkName: "hall", extraSinks: ["headset"])
            let broker = try await MosquittoBroker.start()
            let hall = try await MonitorRecorder.start(pulse, sink: "hall")
            let headset = try await MonitorRecorder.start(pulse, sink: "headset")
            let daemon = try await SpeakdProcess.start(
                audio: "pulse:hall",
                arguments: [
                    "--output", "headset=pulse:headset,private", "--log-level", "debug", "--mqtt", broker.url,
                    "--mqtt-id", "k1", "--mqtt-site", Self.site,
                ],
                environment: pulse.environment)
            // Another client's event stream, with the word events.
            let events = EventStreamRecorder(client: daemon.unixClient, path: "/v1/events?progress=true")
            try await daemon.waitForEventStreams(1)
            let observer = try await Observer.start(broker, topics: ["speakd/#"])
            let deadline = ContinuousClock.now + .seconds(10)
            while try await daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self).mqtt?.state
                != .connected
            {
                guard ContinuousClock.now < deadline else { throw SpeakdProcess.Failure(description: daemon.log) }
                try await Task.sleep(for: .milliseconds(20))
            }

            let text = "Your code word is \(Self.secret), please keep it to yourself"
            // No output named: the one private output speaks it.
            let response = try await post(["text": text, "private": true], via: daemon.unixClient)
            #expect(response.status == 202, "\(String(decoding: response.body, as: UTF8.self))")
            let accepted = try response.decode(AnnouncementAccepted.self)
            let key = try #require(accepted.key)
            #expect(await events.waitFor(.started, of: accepted.id) != nil)
            // While it speaks: the listing and its status show no text to another client.
            let listing = try await daemon.unixClient.send("GET", "/v1/announcements")
            let status = try await daemon.unixClient.send("GET", "/v1/announcements/\(accepted.id)")
            let statusPage = try await daemon.unixClient.send("GET", "/")
            // Through MQTT too, to the device.
            let correlation = try await observer.ask(
                FleetTopics(site: Self.site).device("k1"),
                #"{"text": "Your balance is \#(Self.secret) crowns", "private": true, "requestId": "p1"}"#)
            let reports = try await observer.outcomes(for: correlation, count: 1)
            let mqttID = try #require(reports.first?.event?.id, "\(reports)")
            #expect(await events.waitForFinished([accepted.id, mqttID]))
            let metrics = try await daemon.unixClient.send("GET", "/metrics")
            // A null sink has no ports: its headset stays unknown, and private speech plays.
            let health = try await daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self)
            let headsetOutput = health.outputs?.first { $0.name == "headset" }
            #expect(headsetOutput?.private == true && headsetOutput?.headset == .unknown)
            #expect(health.outputs?.first { $0.name == "default" }?.private == nil)
            let later = try await daemon.unixClient.send("GET", "/v1/announcements/\(accepted.id)")
                .decode(AnnouncementStatus.self)
            // Its poster holds the key and sees its text.
            let poster = try await daemon.unixClient.send(
                "GET", "/v1/announcements/\(accepted.id)", headers: [("Speak-Announcement-Key", key)]
            ).decode(AnnouncementStatus.self)
            let wrongKey = try await daemon.unixClient.send(
                "GET", "/v1/announcements/\(accepted.id)",
                headers: [("Speak-Announcement-Key", String(repeating: "0", count: key.count))]
            ).decode(AnnouncementStatus.self)
            try await Task.sleep(for: .milliseconds(300))
            let (exit, _) = await daemon.stop()
            #expect(exit == 0)
            events.stop()
            let hallAudio = AudioAnalysis(samples: await hall.stop(), sampleRate: hall.sampleRate)
            let headsetAudio = AudioAnalysis(samples: await headset.stop(), sampleRate: headset.sampleRate)
            await broker.stop()
            await pulse.stop()

            #expect(events.finished(accepted.id).first?.success == true)
            #expect(events.finished(accepted.id).first?.output == "headset")
            #expect(events.finished(mqttID).first?.output == "headset")
            expectExactlyOneFinished([accepted.id, mqttID], in: events.events)
            #expect(
                headsetAudio.soundingDuration(silenceLevel: Recording.silenceLevel) > 1.5,
                "the headset heard too little")
            #expect(
                hallAudio.soundingSegments(silenceLevel: Recording.silenceLevel).isEmpty,
                "the hall heard \(hallAudio.soundingSegments(silenceLevel: Recording.silenceLevel))")

            #expect(poster.text == text)
            #expect(poster.private == true)
            #expect(later.text.isEmpty && later.private == true)
            #expect(wrongKey.text.isEmpty)
            // Word events were sent, without their words or places.
            #expect(events.events.contains { $0.id == accepted.id && $0.type == .word })
            #expect(events.events.filter { $0.id == accepted.id }.allSatisfy { $0.word == nil && $0.range == nil })
            let places: [(String, String)] = [
                ("the log", daemon.log),
                ("the listing", String(decoding: listing.body, as: UTF8.self)),
                ("its status", String(decoding: status.body, as: UTF8.self)),
                ("the status page", String(decoding: statusPage.body, as: UTF8.self)),
                ("/metrics", String(decoding: metrics.body, as: UTF8.self)),
                ("the events", String(decoding: try WireFormat.encoder().encode(events.events), as: UTF8.self)),
                (
                    "MQTT",
                    observer.messages.filter { !$0.topic.hasSuffix("/announce") }
                        .map { "\($0.topic) \(String(decoding: $0.payload, as: UTF8.self))" }.joined(separator: "\n")
                ),
            ]
            #expect(observer.messages.contains { $0.topic.contains("events") || $0.topic.contains("replies") })
            for (place, content) in places {
                #expect(!content.contains(Self.secret), "\(place) shows the private text:\n\(content)")
            }
            #expect(daemon.log.contains(accepted.id), "the log names the announcement by id")
        }

        @Test("private bad input is 4xx naming the field; with no private output it is refused, never spoken")
        func refusedNamingTheField() async throws {
            let pulse = try await PulseAudioServer.start(sinkName: "hall", extraSinks: ["headset"])
            let hall = try await MonitorRecorder.start(pulse, sink: "hall")
            // First without a private output: nothing private may be spoken.
            let plain = try await SpeakdProcess.start(
                audio: "pulse:hall", arguments: ["--output", "headset=pulse:headset"], environment: pulse.environment)
            for body: [String: Any] in [
                ["text": "Your PIN is \(Self.secret)", "private": true],
                ["text": "Your PIN is \(Self.secret)", "private": true, "output": "headset"],
            ] {
                let response = try await post(body, via: plain.unixClient)
                #expect(response.status == 422)
                let field = try response.decode(ErrorResponse.self).error.field
                #expect(field == (body["output"] == nil ? "private" : "output"))
            }
            _ = await plain.stop()

            let daemon = try await SpeakdProcess.start(
                audio: "pulse:hall", arguments: ["--output", "headset=pulse:headset,private"],
                environment: pulse.environment)
            let events = EventStreamRecorder(client: daemon.unixClient)
            try await daemon.waitForEventStreams(1)
            for (body, status, field) in [
                (["text": "Hello", "private": true, "output": "default"] as [String: Any], 422, "output"),
                (["text": "Hello", "private": true, "output": "lobby"], 422, "output"),
                (["text": "Hello", "private": "yes"], 422, "private"),
            ] {
                let response = try await post(body, via: daemon.unixClient)
                #expect(response.status == status, "\(body)")
                #expect(try response.decode(ErrorResponse.self).error.field == field, "\(body)")
            }
            // POST /v1/speech checks the same body the same way, and renders it for its caller.
            let speechRefused = try await daemon.unixClient.send(
                "POST", "/v1/speech", headers: [("Content-Type", "application/json")],
                body: Array(#"{"text": "Hello", "private": true, "output": "default"}"#.utf8))
            #expect(speechRefused.status == 422)
            #expect(try speechRefused.decode(ErrorResponse.self).error.field == "output")
            let rendered = try await daemon.speech(["text": "Your PIN", "private": true])
            #expect(rendered.samples.count > 1_000)
            // A public announcement may still go to the private output.
            let id = try await post(["text": "Thank you", "output": "headset"], via: daemon.unixClient)
                .decode(AnnouncementAccepted.self).id
            #expect(await events.waitForFinished([id]))
            _ = await daemon.stop()
            events.stop()
            let hallAudio = AudioAnalysis(samples: await hall.stop(), sampleRate: hall.sampleRate)
            await pulse.stop()
            expectExactlyOneFinished([id], in: events.events)
            #expect(events.events.allSatisfy { $0.id == id }, "a refused request got events: \(events.events)")
            #expect(hallAudio.soundingSegments(silenceLevel: Recording.silenceLevel).isEmpty)
        }
    }
}
