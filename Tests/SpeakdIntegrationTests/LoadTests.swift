import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Synchronization
import Testing

extension SpeakdIntegration {
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct LoadTests {
        static let clients = 50
        static let postsPerClient = 4
        static let seed: UInt64 = 20_261_121

        /// What one client saw.
        struct ClientLog: Sendable {
            var accepted: [String] = []
            /// Texts of the posts refused with 429.
            var refused: [String] = []
            var otherFailures: [String] = []
            var cancelRequests = 0
            var cancelledByRequest = 0
        }

        @Test(
            "50 concurrent clients over TCP and the Unix socket: no finished event lost or duplicated, refusals have no events"
        )
        func concurrentClients() async throws {
            let daemon = try await SpeakdProcess.start(
                audio: "null", arguments: ["--max-queue", "16", "--event-history", "8192"])
            // Lifecycle events only: what this test counts (progress events are live and unnumbered
            // in the history, and would only add load).
            let events = EventStreamRecorder(client: daemon.unixClient, path: "/v1/events?progress=false")
            try await daemon.waitForEventStreams(1)
            let began = ContinuousClock.now

            let logs = try await withThrowingTaskGroup(of: ClientLog.self) { group in
                for client in 0..<Self.clients {
                    let http = client.isMultiple(of: 2) ? daemon.tcpClient : daemon.unixClient
                    let other = client.isMultiple(of: 2) ? daemon.unixClient : daemon.tcpClient
                    group.addTask {
                        var random = SplitMix64(seed: Self.seed &+ UInt64(client))
                        var log = ClientLog()
                        for number in 0..<Self.postsPerClient {
                            let priority = AnnouncementPriority.allCases.randomElement(using: &random)!
                            let queue = Double.random(in: 0..<1, using: &random) < 0.7
                            // Unique text per post: refused posts are recognised by it on the event stream.
                            let text = "Gate \(client) number \(number)"
                            var body: [String: Any] = ["text": text, "priority": priority.rawValue, "queue": queue]
                            if Double.random(in: 0..<1, using: &random) < 0.2 {
                                body["expiresAfter"] = Double.random(in: 0.2...1.5, using: &random)
                            }
                            let response = try await post(body, via: http)
                            switch response.status {
                            case 202:
                                let id = try response.decode(AnnouncementAccepted.self).id
                                log.accepted.append(id)
                                if Double.random(in: 0..<1, using: &random) < 0.3 {
                                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...150, using: &random)))
                                    let cancel = try await (Bool.random(using: &random) ? http : other)
                                        .send("DELETE", "/v1/announcements/\(id)")
                                    log.cancelRequests += 1
                                    if cancel.status == 200 {
                                        log.cancelledByRequest += try cancel.decode(CancelResult.self).cancelled
                                    } else {
                                        log.otherFailures.append("DELETE \(id): \(cancel.status)")
                                    }
                                }
                            case 429:
                                if response.error?.error.code == ErrorResponse.Code.queueFull {
                                    log.refused.append(text)
                                } else {
                                    log.otherFailures.append(
                                        "429 without queueFull: \(String(decoding: response.body, as: UTF8.self))")
                                }
                            default:
                                log.otherFailures.append(
                                    "POST \(text): \(response.status) \(String(decoding: response.body, as: UTF8.self))"
                                )
                            }
                            try await Task.sleep(for: .milliseconds(Int.random(in: 50...600, using: &random)))
                        }
                        return log
                    }
                }
                var logs: [ClientLog] = []
                for try await log in group { logs.append(log) }
                return logs
            }
            let posted = ContinuousClock.now - began

            // The null sink plays in real time: let some of what waits be spoken, then cancel the
            // rest, so the run ends in bounded time.
            try await Task.sleep(for: .seconds(2))
            let cancelAll = try await daemon.unixClient.send("DELETE", "/v1/announcements")
            #expect(cancelAll.status == 200)
            let accepted = logs.flatMap(\.accepted)
            let refused = logs.flatMap(\.refused)
            let allFinished = await events.waitForFinished(accepted, timeout: .seconds(30))
            // Let any stray (duplicate) event arrive before counting.
            try await Task.sleep(for: .milliseconds(300))
            let received = events.received
            events.stop()
            let (status, _) = await daemon.stop()

            var finishedCount: [String: Int] = [:]
            var byReason: [FinishReason: Int] = [:]
            for item in received where item.event.type == .finished {
                finishedCount[item.event.id, default: 0] += 1
                byReason[item.event.reason ?? .failed, default: 0] += 1
            }
            let lost = accepted.filter { finishedCount[$0] == nil }
            let duplicated = finishedCount.filter { $0.value > 1 }
            let strangers = Set(finishedCount.keys).subtracting(accepted)
            let refusedTexts = Set(refused)
            let eventsForRefused = received.filter { refusedTexts.contains($0.event.text) }
            let sequences = received.compactMap(\.sequence)
            let repeatedSequences = sequences.count - Set(sequences).count

            print(
                """
                load: \(Self.clients) clients × \(Self.postsPerClient) posts in \(posted), seed \(Self.seed)
                load: accepted \(accepted.count), refused (429) \(refused.count), other failures \(logs.flatMap(\.otherFailures).count)
                load: cancel requests \(logs.map(\.cancelRequests).reduce(0, +)) (cancelled \(logs.map(\.cancelledByRequest).reduce(0, +))), cancel-all cancelled \((try? cancelAll.decode(CancelResult.self).cancelled) ?? -1)
                load: finished by reason \(FinishReason.allCases.map { "\($0.rawValue) \(byReason[$0] ?? 0)" }.joined(separator: ", "))
                load: lost \(lost.count), duplicated \(duplicated.count), unknown ids \(strangers.count), events for refused posts \(eventsForRefused.count), stream reconnects \(events.reconnects)
                """)

            #expect(logs.flatMap(\.otherFailures).isEmpty, "\(logs.flatMap(\.otherFailures))")
            #expect(accepted.count + refused.count == Self.clients * Self.postsPerClient)
            #expect(!refused.isEmpty, "the burst never filled the queue; the refusal path was not exercised")
            #expect(allFinished)
            #expect(lost.isEmpty, "no finished event for \(lost)")
            #expect(duplicated.isEmpty, "several finished events for \(duplicated)")
            #expect(strangers.isEmpty)
            #expect(eventsForRefused.isEmpty, "refused posts have events: \(eventsForRefused.map(\.event))")
            #expect(repeatedSequences == 0, "event ids repeated on the stream")
            #expect(byReason[.failed, default: 0] == 0)
            #expect(status == 0)
            // Every accepted id: queued first, at most one started, finished last.
            var perID: [String: [AnnouncementEvent.Kind]] = [:]
            for item in received { perID[item.event.id, default: []].append(item.event.type) }
            for id in accepted {
                let kinds = perID[id] ?? []
                #expect(kinds == [.queued, .finished] || kinds == [.queued, .started, .finished], "\(id): \(kinds)")
            }
        }
    }
}
