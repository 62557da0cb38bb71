import Foundation
import SpeakAPI
import SpeakFleet
import SpeakMQTT
import SpeakTestSupport
import SpeakdHarness
import Synchronization
import Testing

extension SpeakdIntegration {
    /// Three real `speakd` kiosks on one private mosquitto broker, each playing into a WAV file:
    /// routing to all, a group and one device; outcomes on the response topic; refusals;
    /// message expiry; a kiosk killed; the broker killed and restarted.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct FleetTests {
        static let site = "museum"

        @Test func allGroupAndDeviceReachExactlyTheirKiosks() async throws {
            let fleet = try await Fleet.start()
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/replies/#"])
            let statuses = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/device/k1/status"])

            let all = try await observer.ask(FleetTopics(site: Self.site).all, #"{"text": "Platform four is closed"}"#)
            let allOutcomes = try await observer.outcomes(for: all, count: 3)
            #expect(Set(allOutcomes.map(\.device)) == ["k1", "k2", "k3"])
            #expect(allOutcomes.allSatisfy { $0.type == .finished && $0.event?.reason == .completed })
            for kiosk in fleet.kiosks {
                let sounding = try WAVReader.soundingDurationIfAny(kiosk.wav)
                #expect(sounding > 0.5, "\(kiosk.id) played \(sounding) s")
            }

            let group = try await observer.ask(FleetTopics(site: Self.site).group("b"), #"{"text": "Group b"}"#)
            let device = try await observer.ask(FleetTopics(site: Self.site).device("k1"), #"{"text": "Only one"}"#)
            #expect(Set(try await observer.outcomes(for: group, count: 2).map(\.device)) == ["k2", "k3"])
            #expect(Set(try await observer.outcomes(for: device, count: 1).map(\.device)) == ["k1"])
            // Nothing more arrives for either: the other kiosks never heard them.
            try await Task.sleep(for: .seconds(1))
            #expect(observer.reports(for: group).count == 2)
            #expect(observer.reports(for: device).count == 1)

            let health = try await fleet.kiosks[0].daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self)
            #expect(health.mqtt?.state == .connected)
            #expect(health.mqtt?.device == "k1")

            // k1's retained status: sent when it changes, never the same twice in a row, idle at the end.
            let published = statuses.messages.map(\.payload)
            let repeats = zip(published, published.dropFirst()).filter { $0 == $1 }.count
            #expect(repeats == 0, "\(published.map { String(decoding: $0, as: UTF8.self) })")
            let last = try #require(
                published.last.flatMap { try? WireFormat.decoder().decode(FleetStatus.self, from: $0) })
            #expect(last.state == .online && last.queue?.speaking == false && last.queue?.waiting == 0, "\(last)")
        }

        @Test func speakCommandPublishesAndCollectsEveryOutcome() async throws {
            let fleet = try await Fleet.start()
            let result = try await BuiltProduct.run(
                "speak",
                [
                    "--mqtt", fleet.broker.url, "--site", Self.site, "--group", "a", "--wait", "--count", "2",
                    "--timeout", "20", "Doors closing",
                ])
            #expect(result.status == 0, "\(result.standardError)")
            let reports = result.standardOutput.split(separator: "\n").compactMap {
                try? WireFormat.decoder().decode(FleetReport.self, from: Data($0.utf8))
            }
            #expect(Set(reports.map(\.device)) == ["k1", "k2"])
            #expect(reports.allSatisfy { $0.event?.reason == .completed })
        }

        /// Without --wait, `speak` ends at the broker's acknowledgement, and reads its reason code:
        /// a message to a kiosk nobody runs ("No matching subscribers") is a failure, not a success.
        @Test func speakCommandWithoutWaitFailsWhenNoKioskSubscribes() async throws {
            let fleet = try await Fleet.start(kiosks: [("k1", [])])
            let heard = try await BuiltProduct.run(
                "speak", ["--mqtt", fleet.broker.url, "--site", Self.site, "--device", "k1", "Doors closing"])
            #expect(heard.status == 0, "\(heard.standardError)")
            #expect(heard.standardOutput.contains("published to"), "\(heard.standardOutput)")
            let nobody = try await BuiltProduct.run(
                "speak", ["--mqtt", fleet.broker.url, "--site", Self.site, "--device", "k9", "Doors closing"])
            #expect(nobody.status == 1, "\(nobody.standardOutput)")
            #expect(nobody.standardError.contains("no kiosk subscribes to"), "\(nobody.standardError)")
            #expect(nobody.standardError.contains("device/k9"), "\(nobody.standardError)")
        }

        @Test func invalidMessageIsAnsweredWithTheAPIErrorAndNeverSpoken() async throws {
            let fleet = try await Fleet.start()
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/replies/#"])
            let bad = try await observer.ask(
                FleetTopics(site: Self.site).device("k2"), #"{"text": "Too high", "pitch": 9}"#)
            let garbage = try await observer.ask(FleetTopics(site: Self.site).device("k2"), "not json {")
            let unknownChime = try await observer.ask(
                FleetTopics(site: Self.site).device("k2"), #"{"text": "Doors closing", "chimeAfter": "gong"}"#)
            let badReport = try #require(try await observer.outcomes(for: bad, count: 1).first)
            #expect(badReport.type == .refused)
            #expect(badReport.error?.code == "outOfRange")
            #expect(badReport.error?.field == "pitch")
            let garbageReport = try #require(try await observer.outcomes(for: garbage, count: 1).first)
            #expect(garbageReport.error?.code == ErrorResponse.Code.malformedRequest)
            let chimeReport = try #require(try await observer.outcomes(for: unknownChime, count: 1).first)
            #expect(chimeReport.type == .refused)
            #expect(chimeReport.error?.field == "chimeAfter")
            #expect(chimeReport.error?.message.contains("gong") == true, "\(String(describing: chimeReport.error))")
            // The same answer the HTTP API gives for the same body.
            let http = try await fleet.kiosks[1].daemon.unixClient.send(
                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                body: Array(#"{"text": "Too high", "pitch": 9}"#.utf8))
            #expect(http.error?.error == badReport.error)
            let httpChime = try await fleet.kiosks[1].daemon.unixClient.send(
                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                body: Array(#"{"text": "Doors closing", "chimeAfter": "gong"}"#.utf8))
            #expect(httpChime.error?.error == chimeReport.error)
            // Both fronts go through one intake: every kind of bad body gets one answer.
            let bodies = [
                #"{"text": "Typo", "pich": 1.2}"#, #"{"text": "Nowhere", "output": "nowhere"}"#,
                #"{"text": "Nobody", "language": "xx-QQ"}"#, #"{"spans": []}"#, "[1, 2]", #"{"text": "a",}"#,
                #"{"text": "Late", "expiresAfter": -1}"#, #"{"ssml": "<speak><audio src='x'/></speak>"}"#,
            ]
            for body in bodies {
                let report = try #require(
                    try await observer.outcomes(
                        for: try await observer.ask(FleetTopics(site: Self.site).device("k2"), body), count: 1
                    ).first)
                let answer = try await fleet.kiosks[1].daemon.unixClient.send(
                    "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                    body: Array(body.utf8))
                #expect(report.type == .refused, "\(body)")
                #expect(
                    answer.error?.error == report.error,
                    "\(body): HTTP \(answer.status), MQTT \(String(describing: report.error))")
            }
            let queued = try await fleet.kiosks[1].daemon.unixClient.send("GET", "/v1/announcements")
                .decode(AnnouncementList.self)
            #expect(queued.announcements.isEmpty)
            #expect(try WAVReader.soundingDurationIfAny(fleet.kiosks[1].wav) == 0)
            #expect(fleet.kiosks[1].daemon.isRunning)
        }

        @Test func killedKioskLeavesOfflineAndMissesOnlyWhatExpired() async throws {
            let fleet = try await Fleet.start()
            let observer = try await Observer.start(
                fleet.broker, topics: ["speakd/\(Self.site)/replies/#", "speakd/\(Self.site)/device/k3/status"])
            let stopped = await fleet.kiosks[2].daemon.stop(signal: SIGKILL)
            #expect(stopped.status == 128 + SIGKILL)
            let offline = await observer.wait(timeout: .seconds(10)) { messages in
                messages.last { $0.topic.hasSuffix("/k3/status") }.flatMap {
                    try? WireFormat.decoder().decode(FleetStatus.self, from: $0.payload)
                }?.state == .offline
            }
            #expect(offline, "no offline status after the kiosk was killed")
            // Retained: a control room that subscribes later sees it too.
            let late = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/device/k3/status"])
            #expect(
                await late.wait(timeout: .seconds(5)) { messages in
                    messages.contains { $0.retain && String(decoding: $0.payload, as: UTF8.self).contains("offline") }
                })

            // While it is away, its session keeps both; one expires before it comes back.
            let expiring = try await observer.ask(
                FleetTopics(site: Self.site).device("k3"), #"{"text": "Expired message"}"#, expiry: 1)
            let lasting = try await observer.ask(
                FleetTopics(site: Self.site).device("k3"), #"{"text": "Still wanted"}"#)
            try await Task.sleep(for: .seconds(2))
            let back = try await Kiosk.start(id: "k3", groups: ["b"], broker: fleet.broker)
            let outcome = try #require(try await observer.outcomes(for: lasting, count: 1).first)
            #expect(outcome.device == "k3" && outcome.event?.reason == .completed)
            try await Task.sleep(for: .seconds(1))
            #expect(observer.reports(for: expiring).isEmpty, "the expired message was delivered")
            let history = EventStreamRecorder(client: back.daemon.unixClient)
            defer { history.stop() }
            #expect(await history.wait(timeout: .seconds(5)) { $0.contains { $0.type == .finished } })
            #expect(!history.events.contains { $0.text == "Expired message" })
        }

        @Test func brokerDownAtStartDoesNotStopSpeaking() async throws {
            let port = try SpeakdProcess.freeLoopbackPort()
            let wav = URL(fileURLWithPath: "/tmp/speakd-fleet-late-\(UUID().uuidString.prefix(8)).wav")
            defer { try? FileManager.default.removeItem(at: wav) }
            let daemon = try await SpeakdProcess.start(
                audio: "wav:\(wav.path)",
                arguments: [
                    "--engine-workers", "1", "--mqtt", "mqtt://127.0.0.1:\(port)", "--mqtt-id", "late", "--mqtt-site",
                    Self.site,
                ])
            let health = try await daemon.unixClient.send("GET", "/healthz")
            #expect(health.status == 200)
            #expect(try health.decode(HealthReport.self).mqtt?.state == .connecting)
            let local = try await daemon.unixClient.send(
                "POST", "/v1/announcements?wait=true", headers: [("Content-Type", "application/json")],
                body: Array(#"{"text": "Spoken without a broker"}"#.utf8))
            #expect(try local.decode(AnnouncementEvent.self).reason == .completed)

            let broker = try await MosquittoBroker.start(port: port)
            let observer = try await Observer.start(broker, topics: ["speakd/\(Self.site)/replies/#"])
            let deadline = ContinuousClock.now + .seconds(15)
            while try await daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self).mqtt?.state
                != .connected
            {
                try #require(ContinuousClock.now < deadline, "not connected within 15 s:\n\(daemon.log)")
                try await Task.sleep(for: .milliseconds(50))
            }
            try await Task.sleep(for: .milliseconds(200))
            let asked = try await observer.ask(FleetTopics(site: Self.site).all, #"{"text": "Now through the broker"}"#)
            let outcome = try #require(try await observer.outcomes(for: asked, count: 1).first)
            #expect(outcome.device == "late" && outcome.event?.reason == .completed)
        }

        @Test func brokerKilledMidStreamLosesNothingAndRepeatsNothing() async throws {
            let fleet = try await Fleet.start()
            let observer = try await Observer.start(
                fleet.broker, topics: ["speakd/\(Self.site)/device/+/status"])
            let texts = (1...6).map { "Fleet message \($0)" }
            let body = { (index: Int) in #"{"text": "\#(texts[index])", "requestId": "stream-\#(index)"}"# }
            for index in 0..<3 {
                try observer.publish(FleetTopics(site: Self.site).all, body(index))
            }
            await fleet.broker.kill()
            try await Task.sleep(for: .milliseconds(300))
            // The kiosks keep speaking while the broker is away; their health says so.
            let health = try await fleet.kiosks[0].daemon.unixClient.send("GET", "/healthz")
            #expect(health.status == 200)
            #expect(try health.decode(HealthReport.self).mqtt?.state == .connecting)
            let restarted = ContinuousClock.now
            try await fleet.broker.restart()
            // Each kiosk publishes `online` after subscribing again, on the same connection.
            let online = await observer.wait(timeout: .seconds(20)) { messages in
                let after = messages.filter { $0.received > restarted }
                return Set(
                    after.compactMap { try? WireFormat.decoder().decode(FleetStatus.self, from: $0.payload) }
                        .filter { $0.state == .online }.map(\.device)) == ["k1", "k2", "k3"]
            }
            #expect(online, "the kiosks did not come back")
            // Each names its outputs as NAME=SINK, the default one first.
            let outputs = observer.messages.compactMap {
                try? WireFormat.decoder().decode(FleetStatus.self, from: $0.payload)
            }
            .filter { $0.state == .online }.compactMap(\.outputs)
            #expect(!outputs.isEmpty && outputs.allSatisfy { $0.first?.hasPrefix("default=") == true }, "\(outputs)")
            // A sender unsure what got through before the crash publishes everything again.
            for index in 0..<6 {
                try observer.publish(FleetTopics(site: Self.site).all, body(index))
            }
            for kiosk in fleet.kiosks {
                let history = EventStreamRecorder(client: kiosk.daemon.unixClient)
                defer { history.stop() }
                let all = await history.wait(timeout: .seconds(40)) { events in
                    Set(events.filter { $0.type == .finished }.map(\.text)).isSuperset(of: texts)
                }
                #expect(all, "\(kiosk.id) finished \(history.events.filter { $0.type == .finished }.map(\.text))")
                try await Task.sleep(for: .milliseconds(500))
                for text in texts {
                    let finished = history.events.filter { $0.type == .finished && $0.text == text }
                    #expect(finished.count == 1, "\(kiosk.id) spoke '\(text)' \(finished.count) times")
                }
            }
        }

        /// A payload over the HTTP body limit is refused with HTTP's 413 error before it is copied
        /// or decoded, through a broker without the documented `message_size_limit` (a kiosk
        /// cannot count on its broker); one over the kiosk's maximum packet size never reaches
        /// it. Either way the kiosk's memory stays where it was.
        @Test func oversizedPayloadsAreRefusedOrNeverReachTheKiosk() async throws {
            let fleet = try await Fleet.start(kiosks: [("k1", [])], settings: [])
            let kiosk = fleet.kiosks[0]
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/replies/#"])
            let topic = FleetTopics(site: Self.site).device("k1")
            // Warm: one announcement through the same path, so the measure sees only the big ones.
            let warm = try await observer.ask(topic, #"{"text": "Warm up"}"#)
            #expect(try await observer.outcomes(for: warm, count: 1).first?.event?.reason == .completed)
            try await Task.sleep(for: .milliseconds(300))

            let body = Self.payload(bytes: 1 << 20)
            let before = try residentKilobytes(kiosk.daemon.pid)
            let peak = try PeakResident(kiosk.daemon.pid)
            var refusals: [String] = []
            for _ in 0..<4 {
                refusals.append(try await observer.ask(topic, body))
                _ = try await observer.outcomes(for: refusals.last!, count: 1)
            }
            let grown = try peak.growth()
            let kept = try residentKilobytes(kiosk.daemon.pid) - before
            #expect(grown < 3_584, "the kiosk's resident memory peaked \(grown) kB higher")
            #expect(kept < 3 << 10, "the kiosk's resident memory grew \(kept) kB")
            for correlation in refusals {
                let report = try #require(observer.reports(for: correlation).first)
                #expect(report.type == .refused)
                #expect(report.error?.code == ErrorResponse.Code.tooLarge && report.error?.field == "body")
                #expect(report.error?.message == "the body is \(1 << 20) bytes; the limit is \(64 << 10)")
            }
            // The answer HTTP gives the same body (a smaller one: HTTP answers a declared length
            // over the limit without reading the body, and a 1 MiB write would meet a closed socket).
            let over = Self.payload(bytes: 70_000)
            let http = try await kiosk.daemon.unixClient.send(
                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")], body: Array(over.utf8))
            #expect(http.status == 413)
            let overReport = try #require(
                try await observer.outcomes(for: try await observer.ask(topic, over), count: 1).first)
            #expect(overReport.error == http.error?.error, "\(String(describing: overReport.error))")

            // Over the maximum packet size: the broker drops it for this kiosk, which hears nothing.
            let huge = Self.payload(bytes: Int(FleetLink.maximumPacketSize(bodyLimit: 64 << 10)) + 1)
            let hugePeak = try PeakResident(kiosk.daemon.pid)
            let dropped = try await observer.ask(topic, huge)
            let after = try await observer.ask(topic, #"{"text": "After the big one"}"#)
            let outcome = try #require(try await observer.outcomes(for: after, count: 1).first)
            #expect(outcome.event?.reason == .completed)
            #expect(observer.reports(for: dropped).isEmpty, "\(observer.reports(for: dropped))")
            let hugeGrown = try hugePeak.growth()
            #expect(hugeGrown < 3 << 10, "the kiosk's resident memory peaked \(hugeGrown) kB higher")
            #expect(kiosk.daemon.isRunning)
        }

        /// Through the documented broker, a payload over the kiosks' body limit stops at the
        /// broker, which tells an MQTT 5 sender at QoS 1 so (a PUBACK with an error reason code);
        /// the kiosk never hears of it.
        @Test func documentedBrokerRefusesAnOversizedPublishToItsSender() async throws {
            let fleet = try await Fleet.start(kiosks: [("k1", [])])
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/device/k1/events"])
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-fleet-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let body = directory.appendingPathComponent("body.json")
            let log = directory.appendingPathComponent("mosquitto_pub.log")
            try Data(Self.payload(bytes: (64 << 10) + 1).utf8).write(to: body)
            let sender = try ChildProcess(
                "/usr/bin/mosquitto_pub",
                [
                    "-h", "127.0.0.1", "-p", "\(fleet.broker.port)", "-V", "mqttv5", "-q", "1", "-t",
                    FleetTopics(site: Self.site).device("k1"), "-f", body.path,
                ], environment: ProcessInfo.processInfo.environment, output: log.path)
            #expect(await sender.wait(timeout: .seconds(10)) != nil)
            let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(said.contains("Packet too large"), "mosquitto_pub said: \(said)")
            // The next message is the first the kiosk hears.
            try observer.publish(FleetTopics(site: Self.site).device("k1"), #"{"text": "Small", "requestId": "small"}"#)
            #expect(
                await observer.wait(timeout: .seconds(10)) { messages in
                    messages.contains { String(decoding: $0.payload, as: UTF8.self).contains(#""requestId":"small""#) }
                })
            let reports = observer.messages.compactMap {
                try? WireFormat.decoder().decode(FleetReport.self, from: $0.payload)
            }
            #expect(!reports.contains { $0.type == .refused }, "\(reports)")
        }

        /// A refused request is forgotten: the retry a sender makes after `queueFull` is spoken,
        /// once, and a repeat of the accepted one is still dropped.
        @Test func retryAfterQueueFullIsSpokenOnce() async throws {
            let fleet = try await Fleet.start(kiosks: [("k1", [])], arguments: ["--max-queue", "1"])
            let client = fleet.kiosks[0].daemon.unixClient
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/replies/#"])
            let history = EventStreamRecorder(client: client)
            defer { history.stop() }
            // One speaking, paused, and one waiting: the queue is full. A WAV file takes audio as
            // fast as it is rendered, so a long text is posted until the pause finds it speaking.
            let json = [("Content-Type", "application/json")]
            let long = String(repeating: "Attention please, the museum closes in ten minutes. ", count: 60)
            var paused = false
            for _ in 0..<5 where !paused {
                let speaking = try await client.send(
                    "POST", "/v1/announcements", headers: json, body: Array(#"{"text": "\#(long)"}"#.utf8))
                let id = try speaking.decode(AnnouncementAccepted.self).id
                _ = await history.wait(timeout: .seconds(10)) { $0.contains { $0.type == .started && $0.id == id } }
                paused = try await client.send("POST", "/v1/pause").status == 200
            }
            try #require(paused, "no announcement was still speaking when paused")
            let waiting = try await client.send(
                "POST", "/v1/announcements", headers: json, body: Array(#"{"text": "Waiting"}"#.utf8))
            #expect(waiting.status == 202)

            let body = #"{"text": "Retried after a refusal", "requestId": "retry-1"}"#
            let topic = FleetTopics(site: Self.site).device("k1")
            let first = try #require(
                try await observer.outcomes(for: try await observer.ask(topic, body), count: 1).first)
            #expect(first.type == .refused && first.error?.code == ErrorResponse.Code.queueFull, "\(first)")
            #expect(first.requestId == "retry-1")

            #expect(try await client.send("DELETE", "/v1/announcements").status == 200)
            let retry = try await observer.ask(topic, body)
            let outcome = try #require(try await observer.outcomes(for: retry, count: 1).first)
            #expect(outcome.type == .finished && outcome.event?.reason == .completed, "\(outcome)")
            #expect(outcome.requestId == "retry-1")
            // Accepted now, so remembered: a third copy is a repeat.
            let repeated = try await observer.ask(topic, body)
            try await Task.sleep(for: .seconds(1))
            #expect(observer.reports(for: repeated).isEmpty)
            let spoken = history.events.filter { $0.type == .finished && $0.text == "Retried after a refusal" }
            #expect(spoken.count == 1, "\(spoken)")
        }

        /// 2,000 messages as fast as the sender can publish them, to two kiosks, one of them
        /// stalled for the burst, through a broker with the documented limits: each kiosk answers
        /// every one, accepted (`queued`) or refused (`queueFull`), and loses none. (Mosquitto's
        /// default queue of 1,000 lost 980 of them for the stalled kiosk.)
        @Test func floodThroughTheDocumentedBrokerGetsAnOutcomeForEveryMessage() async throws {
            #expect(
                Fleet.documentedLimits.contains { $0.hasPrefix("max_queued_messages") }, "\(Fleet.documentedLimits)")
            let fleet = try await Fleet.start(kiosks: [("k1", ["a"]), ("k2", ["a"])])
            let observer = try await Observer.start(fleet.broker, topics: ["speakd/\(Self.site)/device/+/events"])
            let count = 2_000
            // k1 stalls for the burst (busy, swapped out, a slow link: its PUBACKs stop), so the
            // broker queues for it; k2 takes them as they come.
            let stalled = fleet.kiosks[0].daemon
            kill(stalled.pid, SIGSTOP)
            var continued = false
            defer { if !continued { kill(stalled.pid, SIGCONT) } }
            for index in 0..<count {
                try observer.publish(
                    FleetTopics(site: Self.site).group("a"),
                    #"{"text": "Flood \#(index)", "requestId": "flood-\#(index)"}"#)
            }
            let published = await observer.waitPublished(count, timeout: .seconds(20))
            #expect(published, "the broker acknowledged \(observer.acknowledged) of \(count)")
            kill(stalled.pid, SIGCONT)
            continued = true
            let expected = Set((0..<count).map { "flood-\($0)" })
            var answered: [String: [String: FleetReport.Kind]] = [:]
            var seen = 0
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                let messages = observer.messages
                for message in messages[seen...] {
                    guard let report = try? WireFormat.decoder().decode(FleetReport.self, from: message.payload),
                        let requestId = report.requestId, report.type == .queued || report.type == .refused
                    else { continue }
                    answered[report.device, default: [:]][requestId] = report.type
                }
                seen = messages.count
                if ["k1", "k2"].allSatisfy({ answered[$0]?.count == count }) { break }
                try await Task.sleep(for: .milliseconds(250))
            }
            for device in ["k1", "k2"] {
                let outcomes = answered[device] ?? [:]
                let accepted = outcomes.values.filter { $0 == .queued }.count
                let missing = expected.subtracting(outcomes.keys)
                #expect(
                    missing.count == 0,
                    "\(device): \(missing.count) of \(count) without an outcome (\(accepted) accepted, \(outcomes.count - accepted) refused)"
                )
                #expect(accepted > 0)
            }
            for kiosk in fleet.kiosks { #expect(kiosk.daemon.isRunning) }
        }

        /// A JSON body of exactly `bytes` bytes, `{"text": "aaa…"}`.
        static func payload(bytes: Int) -> String {
            #"{"text": ""# + String(repeating: "a", count: bytes - 12) + #""}"#
        }
    }
}

/// One `speakd` with `--mqtt`, playing into a WAV file, which goes with it.
final class Kiosk: Sendable {
    let id: String
    let daemon: SpeakdProcess
    let wav: URL

    init(id: String, daemon: SpeakdProcess, wav: URL) {
        self.id = id
        self.daemon = daemon
        self.wav = wav
    }

    deinit {
        try? FileManager.default.removeItem(at: wav)
    }

    static func start(id: String, groups: [String], broker: MosquittoBroker, arguments: [String] = []) async throws
        -> Kiosk
    {
        let wav = URL(fileURLWithPath: "/tmp/speakd-fleet-\(id)-\(UUID().uuidString.prefix(8)).wav")
        let daemon = try await SpeakdProcess.start(
            audio: "wav:\(wav.path)",
            arguments: [
                "--engine-workers", "1", "--mqtt", broker.url, "--mqtt-id", id, "--mqtt-site",
                SpeakdIntegration.FleetTests.site,
            ] + (groups.isEmpty ? [] : ["--mqtt-groups", groups.joined(separator: ",")]) + arguments)
        return Kiosk(id: id, daemon: daemon, wav: wav)
    }

    /// Waits until `/healthz` says connected (and so subscribed, a moment later).
    func connected(by deadline: ContinuousClock.Instant) async throws {
        while try await daemon.unixClient.send("GET", "/healthz").decode(HealthReport.self).mqtt?.state != .connected {
            guard ContinuousClock.now < deadline else {
                throw SpeakdProcess.Failure(description: "\(id) did not connect:\n\(daemon.log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// A broker and three kiosks: k1 in group a, k2 in a and b, k3 in b; all connected.
struct Fleet: Sendable {
    let broker: MosquittoBroker
    let kiosks: [Kiosk]

    /// The limits of the documented broker configuration, `docs/examples/mosquitto-speakd.conf`:
    /// every test broker of a fleet runs with them.
    static let documentedLimits: [String] = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/examples/mosquitto-speakd.conf")
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init).filter { line in
            [
                "message_size_limit", "max_packet_size", "max_queued_messages", "max_queued_bytes",
                "max_inflight_messages",
            ]
            .contains(line.split(separator: " ").first.map(String.init) ?? "")
        }
    }()

    /// - Parameters:
    ///   - kiosks: id and groups of each; by default k1 in a, k2 in a and b, k3 in b.
    ///   - settings: the broker's limits; by default the documented ones.
    ///   - arguments: more `speakd` arguments for every kiosk.
    static func start(
        kiosks: [(String, [String])] = [("k1", ["a"]), ("k2", ["a", "b"]), ("k3", ["b"])],
        settings: [String] = documentedLimits, arguments: [String] = []
    ) async throws -> Fleet {
        let broker = try await MosquittoBroker.start(settings: settings)
        let started = try await withThrowingTaskGroup(of: Kiosk.self) { group in
            for (id, groups) in kiosks {
                group.addTask { try await Kiosk.start(id: id, groups: groups, broker: broker, arguments: arguments) }
            }
            return try await group.reduce(into: [Kiosk]()) { $0.append($1) }
        }
        let fleet = Fleet(broker: broker, kiosks: kiosks.map { kiosk in started.first { $0.id == kiosk.0 }! })
        // Connected and subscribed: each publishes its status after subscribing.
        let deadline = ContinuousClock.now + .seconds(15)
        for kiosk in fleet.kiosks { try await kiosk.connected(by: deadline) }
        try await Task.sleep(for: .milliseconds(200))
        return fleet
    }
}

/// The control room: an MQTT client that publishes requests and records what comes back.
final class Observer: Sendable {
    struct Received: Sendable {
        var topic: String
        var payload: Data
        var retain: Bool
        var correlation: Data?
        var received: ContinuousClock.Instant
    }

    /// What the listener task and the test share.
    private final class Shared: Sendable {
        let messages = Mutex<[Received]>([])
        let connected = Mutex(false)
        let acknowledged = Mutex(0)
    }

    private let client: MQTTClient
    private let shared = Shared()
    private let listener: Task<Void, Never>?

    static func start(_ broker: MosquittoBroker, topics: [String]) async throws -> Observer {
        let observer = try Observer(broker: broker, topics: topics)
        let deadline = ContinuousClock.now + .seconds(10)
        while !observer.shared.connected.withLock({ $0 }) {
            guard ContinuousClock.now < deadline else {
                throw SpeakdProcess.Failure(description: "observer: no broker")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(100))
        return observer
    }

    private init(broker: MosquittoBroker, topics: [String]) throws {
        let client = try MQTTClient(
            .init(
                broker: try MQTTBrokerURL(parsing: broker.url), clientID: "observer-\(UUID().uuidString.prefix(8))",
                cleanStart: true, sessionExpiry: 0))
        self.client = client
        let shared = shared
        listener = Task {
            for await event in client.events {
                switch event {
                case .connected:
                    for topic in topics { client.subscribe(topic) }
                    shared.connected.withLock { $0 = true }
                case .disconnected:
                    shared.connected.withLock { $0 = false }
                case .published:
                    shared.acknowledged.withLock { $0 += 1 }
                case .message(let message):
                    shared.messages.withLock {
                        $0.append(
                            Received(
                                topic: message.topic, payload: message.payload, retain: message.retain,
                                correlation: message.correlationData, received: .now))
                    }
                }
            }
        }
        client.start()
    }

    deinit {
        listener?.cancel()
        client.stop()
    }

    /// Publishes `body` to `topic` asking for outcomes on a reply topic; returns the correlation id.
    func ask(_ topic: String, _ body: String, expiry: UInt32? = nil) async throws -> String {
        let correlation = UUID().uuidString
        try client.publish(
            MQTTOutgoing(
                topic: topic, payload: Data(body.utf8),
                responseTopic: "speakd/\(SpeakdIntegration.FleetTests.site)/replies/\(correlation)",
                correlationData: Data(correlation.utf8), messageExpiry: expiry))
        return correlation
    }

    /// Publishes without asking for an answer.
    func publish(_ topic: String, _ body: String) throws {
        try client.publish(MQTTOutgoing(topic: topic, payload: Data(body.utf8)))
    }

    /// The reports received on the reply topic of `correlation`, checked to carry it back.
    func reports(for correlation: String) -> [FleetReport] {
        shared.messages.withLock { $0 }.filter { $0.topic.hasSuffix("/replies/\(correlation)") }.compactMap { message in
            #expect(message.correlation == Data(correlation.utf8))
            return try? WireFormat.decoder().decode(FleetReport.self, from: message.payload)
        }
    }

    /// Waits for `count` reports for `correlation`.
    func outcomes(for correlation: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [FleetReport] {
        let deadline = ContinuousClock.now + timeout
        while reports(for: correlation).count < count {
            guard ContinuousClock.now < deadline else {
                throw SpeakdProcess.Failure(
                    description: "\(reports(for: correlation).count) of \(count) outcomes within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return reports(for: correlation)
    }

    /// The messages received so far.
    var messages: [Received] { shared.messages.withLock { $0 } }

    /// How many of this client's QoS 1 publishes the broker has acknowledged.
    var acknowledged: Int { shared.acknowledged.withLock { $0 } }

    /// Waits until the broker has acknowledged `count` publishes.
    func waitPublished(_ count: Int, timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while acknowledged < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return acknowledged >= count
    }

    /// Waits until `condition` holds for the messages received so far.
    func wait(timeout: Duration, until condition: ([Received]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(shared.messages.withLock { $0 }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(shared.messages.withLock { $0 })
    }
}

extension WAVReader {
    /// How long the file at `url` sounds; 0 when nothing was ever written to it.
    static func soundingDurationIfAny(_ url: URL) throws -> Double {
        guard FileManager.default.fileExists(atPath: url.path) else { return 0 }
        let wav = try WAVReader(contentsOf: url)
        return AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate).soundingDuration()
    }
}

/// The peak resident memory of a process from now on: `/proc/PID/clear_refs` resets `VmHWM` to
/// the current `VmRSS`, so a peak that came and went between two reads is seen too.
struct PeakResident {
    let pid: pid_t
    let start: Int

    init(_ pid: pid_t) throws {
        self.pid = pid
        try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
        start = try residentKilobytes(pid, peak: true)
    }

    /// How many kB the peak rose since `init`.
    func growth() throws -> Int { try residentKilobytes(pid, peak: true) - start }
}
