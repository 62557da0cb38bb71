import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// Two named outputs on two null sinks of one private PulseAudio server, both monitors recorded:
    /// `default` (`--audio pulse:hall`) and `headset` (`--output headset=pulse:headset`).
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct NamedOutputsTests {
        static let longText =
            "Attention please the train now standing at platform nine will be divided at the next station"

        /// The daemon with both outputs, a recorder on each sink and the event stream.
        struct TwoOutputs {
            let pulse: PulseAudioServer
            let hall: MonitorRecorder
            let headset: MonitorRecorder
            let daemon: SpeakdProcess
            let events: EventStreamRecorder

            static func start(headsetSink: String = "headset") async throws -> TwoOutputs {
                let pulse = try await PulseAudioServer.start(sinkName: "hall", extraSinks: ["headset"])
                do {
                    let hall = try await MonitorRecorder.start(pulse, sink: "hall")
                    let headset = try await MonitorRecorder.start(pulse, sink: "headset")
                    let daemon = try await SpeakdProcess.start(
                        audio: "pulse:hall", arguments: ["--output", "headset=pulse:\(headsetSink)"],
                        environment: pulse.environment)
                    let events = EventStreamRecorder(client: daemon.unixClient)
                    try await daemon.waitForEventStreams(1)
                    return TwoOutputs(pulse: pulse, hall: hall, headset: headset, daemon: daemon, events: events)
                } catch {
                    await pulse.stop()
                    throw error
                }
            }

            /// Stops everything; returns what each sink played.
            func stop() async -> (hall: AudioAnalysis, headset: AudioAnalysis) {
                if daemon.isRunning {
                    let (status, _) = await daemon.stop()
                    #expect(status == 0, "speakd exited with \(String(describing: status)); log:\n\(daemon.log)")
                }
                _ = await events.wait(timeout: .seconds(5)) { _ in events.hasEnded }
                events.stop()
                let hallSamples = await hall.stop()
                let headsetSamples = await headset.stop()
                await pulse.stop()
                return (
                    AudioAnalysis(samples: hallSamples, sampleRate: hall.sampleRate),
                    AudioAnalysis(samples: headsetSamples, sampleRate: headset.sampleRate)
                )
            }

            func accept(_ body: [String: Any]) async throws -> String {
                let response = try await post(body, via: daemon.unixClient)
                #expect(
                    response.status == 202,
                    "POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
                return try response.decode(AnnouncementAccepted.self).id
            }
        }

        static func body(_ text: String, output: String? = nil) -> [String: Any] {
            var body = announcement(text)
            if let output { body["output"] = output }
            return body
        }

        @Test("headset-only speech is heard on the headset sink and not in the hall")
        func headsetOnly() async throws {
            let speakd = try await TwoOutputs.start()
            let id = try await speakd.accept(Self.body("Your ticket is ready", output: "headset"))
            #expect(await speakd.events.waitForFinished([id]))
            let (hall, headset) = await speakd.stop()

            #expect(speakd.events.finished(id).first?.success == true)
            #expect(speakd.events.events(for: id).allSatisfy { $0.output == "headset" })
            #expect(headset.soundingDuration(silenceLevel: Recording.silenceLevel) > 0.5, "the headset heard nothing")
            #expect(
                hall.soundingSegments(silenceLevel: Recording.silenceLevel).isEmpty,
                "the hall heard \(hall.soundingSegments(silenceLevel: Recording.silenceLevel))")
        }

        @Test("both outputs speak at once when both have work, each only on its own sink")
        func bothAtOnce() async throws {
            let speakd = try await TwoOutputs.start()
            let hallID = try await speakd.accept(Self.body(Self.longText))
            #expect(await speakd.events.waitFor(.started, of: hallID) != nil)
            let headsetID = try await speakd.accept(Self.body("Please take your card", output: "headset"))
            // The headset does not wait for the hall: it starts and finishes while the hall speaks.
            #expect(await speakd.events.waitForFinished([headsetID]))
            #expect(speakd.events.finished(hallID).isEmpty, "the hall finished before the headset started")

            let list = try await speakd.daemon.unixClient.send("GET", "/v1/announcements")
                .decode(AnnouncementList.self)
            #expect(list.announcements.first { $0.id == hallID }?.output == "default")
            // `?output=` gives one output's queue alone.
            let hallOnly = try await speakd.daemon.unixClient.send("GET", "/v1/announcements?output=default")
                .decode(AnnouncementList.self)
            #expect(hallOnly.announcements.contains { $0.id == hallID })
            #expect(hallOnly.announcements.allSatisfy { $0.output == "default" })
            let headsetOnly = try await speakd.daemon.unixClient.send("GET", "/v1/announcements?output=headset")
                .decode(AnnouncementList.self)
            #expect(headsetOnly.announcements.allSatisfy { $0.output == "headset" }, "\(headsetOnly)")
            let status = try await speakd.daemon.unixClient.send("GET", "/v1/announcements/\(headsetID)")
                .decode(AnnouncementStatus.self)
            #expect(status.output == "headset")
            #expect(status.state == .finished)

            #expect(await speakd.events.waitForFinished([hallID]))
            // One output's events, the history replayed: the headset's two announcements and none
            // of the hall's, whose events come between them.
            let headsetEvents = EventStreamRecorder(client: speakd.daemon.unixClient, path: "/v1/events?output=headset")
            let laterID = try await speakd.accept(Self.body("Thank you", output: "headset"))
            #expect(await headsetEvents.waitForFinished([headsetID, laterID]))
            headsetEvents.stop()
            // The two streams are two connections: either may hear the last `finished` first.
            #expect(await speakd.events.waitForFinished([laterID]))
            #expect(headsetEvents.events.allSatisfy { $0.output == "headset" }, "\(headsetEvents.events)")
            // Progress events are live only: the first announcement's were not replayed.
            let states = { (events: [AnnouncementEvent]) in
                events.filter { $0.output == "headset" && !$0.type.isProgress }.map { "\($0.type) \($0.id)" }
            }
            #expect(states(headsetEvents.events) == states(speakd.events.events))
            let (hall, headset) = await speakd.stop()
            #expect(speakd.events.finished(hallID).first?.output == "default")
            #expect(speakd.events.finished(headsetID).first?.output == "headset")
            #expect(hall.soundingDuration(silenceLevel: Recording.silenceLevel) > 2)
            #expect(headset.soundingDuration(silenceLevel: Recording.silenceLevel) > 0.5)
            expectExactlyOneFinished([hallID, headsetID, laterID], in: speakd.events.events)
        }

        @Test("an unknown output is 422 naming output, for a post, for cancelling, the list and the events")
        func unknownOutput() async throws {
            let speakd = try await TwoOutputs.start()
            let response = try await post(Self.body("Hello", output: "lobby"), via: speakd.daemon.unixClient)
            #expect(response.status == 422)
            let error = try response.decode(ErrorResponse.self)
            #expect(error.error.field == "output")
            #expect(error.error.message.contains("lobby"))
            let cancel = try await speakd.daemon.unixClient.send("DELETE", "/v1/announcements?output=lobby")
            #expect(cancel.status == 422)
            for path in ["/v1/announcements?output=lobby", "/v1/events?output=lobby"] {
                let read = try await speakd.daemon.unixClient.send("GET", path)
                #expect(read.status == 422, "\(path)")
                #expect(try read.decode(ErrorResponse.self).error.field == "output", "\(path)")
            }
            let cancelHeadset = try await speakd.daemon.unixClient.send("DELETE", "/v1/announcements?output=headset")
            #expect(cancelHeadset.status == 200)
            _ = await speakd.stop()
            #expect(speakd.events.events.isEmpty)
        }

        @Test("a headset unplugged mid-announcement fails that one alone; the hall speaks on and never hears it")
        func outputLostWhileSpeaking() async throws {
            let speakd = try await TwoOutputs.start()
            let hallText = "Attention please the train now standing at platform nine will be divided"
            let reference = try await speakd.daemon.unixClient.send(
                "POST", "/v1/speech", headers: [("Content-Type", "application/json")],
                body: Array(try JSONSerialization.data(withJSONObject: ["text": hallText])))
            let file = speakd.daemon.directory.appendingPathComponent("hall-reference.wav")
            try Data(reference.body).write(to: file)
            let wav = try WAVReader(contentsOf: file)
            let expected = AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate)
                .soundingDuration(silenceLevel: Recording.silenceLevel)

            let start = speakd.hall.recordedFrames
            let hallID = try await speakd.accept(Self.body(hallText))
            // Longer than the hall's, so what the headset had left would be heard after the
            // hall's announcement if the server moved its stream there.
            let headsetID = try await speakd.accept(Self.body(Self.longText + " " + Self.longText, output: "headset"))
            #expect(await speakd.events.waitFor(.started, of: hallID) != nil)
            #expect(await speakd.events.waitFor(.started, of: headsetID) != nil)
            try await Task.sleep(for: .seconds(1))
            try await speakd.pulse.unloadSink("headset")

            #expect(await speakd.events.waitForFinished([headsetID], timeout: .seconds(10)))
            let headsetFinished = speakd.events.finished(headsetID).first
            #expect(headsetFinished?.reason == .failed)
            #expect(headsetFinished?.success == false)
            let detail = headsetFinished?.detail ?? ""
            #expect(detail.contains("pulse:headset") && detail.contains("killed"), "detail: \(detail)")
            #expect(speakd.events.finished(hallID).isEmpty, "the hall's announcement ended with the headset's")

            let health = try await speakd.daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self)
            #expect(health.outputs?.first { $0.name == "headset" }?.state == .unavailable)
            #expect(health.outputs?.first { $0.name == "default" }?.state == .ok)

            #expect(await speakd.events.waitForFinished([hallID], timeout: .seconds(15)))
            #expect(speakd.events.finished(hallID).first?.success == true)
            let hallEnd = speakd.hall.recordedFrames
            // The headset's words would still be going now had its stream moved to the hall.
            try await Task.sleep(for: .seconds(1.5))
            let afterHall = speakd.hall.recordedFrames

            let nextID = try await speakd.accept(Self.body("Doors closing"))
            #expect(await speakd.events.waitForFinished([nextID], timeout: .seconds(10)))
            #expect(speakd.events.finished(nextID).first?.success == true)
            try await Task.sleep(for: .milliseconds(200))
            let health2 = try await speakd.daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self)
            #expect(health2.outputs?.first { $0.name == "headset" }?.state == .unavailable)

            // Plugged in again: speakd's retries find the sink, and the headset speaks.
            try await speakd.pulse.loadSink("headset")
            var back = false
            let deadline = ContinuousClock.now + .seconds(5)
            while !back, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                let health = try await speakd.daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self)
                back = health.outputs?.first { $0.name == "headset" }?.state == .ok
            }
            #expect(back, "the headset did not come back after its sink was loaded again")
            let againID = try await speakd.accept(Self.body("Your ticket is ready", output: "headset"))
            #expect(await speakd.events.waitForFinished([againID], timeout: .seconds(10)))
            #expect(speakd.events.finished(againID).first?.success == true)
            let (hall, _) = await speakd.stop()

            let rate = Double(hall.sampleRate)
            let first = hall.slice(from: Double(start) / rate, to: Double(hallEnd) / rate)
                .soundingDuration(silenceLevel: Recording.silenceLevel)
            #expect(abs(first - expected) < 0.1 * expected, "the hall heard \(first) s of \(expected) s")
            let between = hall.slice(from: Double(hallEnd) / rate + 0.1, to: Double(afterHall) / rate)
                .soundingSegments(silenceLevel: Recording.silenceLevel)
            #expect(between.isEmpty, "the hall heard \(between) after its announcement ended")
            let next = hall.slice(from: Double(afterHall) / rate, to: hall.duration)
                .soundingDuration(silenceLevel: Recording.silenceLevel)
            #expect(next > 0.3, "the next hall announcement was not heard")
            expectExactlyOneFinished([hallID, headsetID, nextID, againID], in: speakd.events.events)
        }

        @Test("an output whose sink fails leaves the others speaking; health says which")
        func failedOutput() async throws {
            // The headset's sink does not exist: that output is unavailable and retried.
            let speakd = try await TwoOutputs.start(headsetSink: "unplugged")
            let health = try await speakd.daemon.unixClient.send("GET", "/healthz")
            #expect(health.status == 200)
            let report = try health.decode(HealthReport.self)
            #expect(report.status == .ok)
            #expect(report.outputs?.map(\.name) == ["default", "headset"])
            #expect(report.outputs?.first { $0.name == "headset" }?.state == .unavailable)
            #expect(report.outputs?.first { $0.name == "default" }?.state == .ok)

            let refused = try await post(Self.body("Hello", output: "headset"), via: speakd.daemon.unixClient)
            #expect(refused.status == 503)
            let id = try await speakd.accept(Self.body("Doors closing"))
            #expect(await speakd.events.waitForFinished([id]))
            let metrics = try await speakd.daemon.unixClient.send("GET", "/metrics")
            let text = String(decoding: metrics.body, as: UTF8.self)
            let up = text.split(separator: "\n").filter { $0.hasPrefix("speakd_output_up{") }
            #expect(up.contains { $0.contains(#"output="headset""#) && $0.hasSuffix(" 0.0") }, "\(up)")
            #expect(up.contains { $0.contains(#"output="default""#) && $0.hasSuffix(" 1.0") }, "\(up)")
            #expect(
                text.split(separator: "\n").contains {
                    $0.hasPrefix("speakd_output_announcements_finished_total{") && $0.contains(#"output="default""#)
                })
            let (hall, headset) = await speakd.stop()
            #expect(speakd.events.finished(id).first?.success == true)
            #expect(hall.soundingDuration(silenceLevel: Recording.silenceLevel) > 0.3)
            #expect(headset.soundingSegments(silenceLevel: Recording.silenceLevel).isEmpty)
        }
    }
}
