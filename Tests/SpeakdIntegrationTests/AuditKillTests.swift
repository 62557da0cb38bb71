import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// The audit log's promise across `kill -9`: a `finished` a client has seen has its row.
    // Five minutes for the default 16 kills, and the same time a kill for more (the full check's
    // 200 take about six minutes for the event stream's test, 15 for the three-a-round one).
    @Suite(.serialized, .timeLimit(.minutes(AuditKills.minutesAllowed)))
    struct AuditKillTests {
        /// How many kills each test makes (``AuditKills/count``).
        static var kills: Int { AuditKills.count }

        @Test("kill -9 right after each finished a client sees: every one has its audit row after the restart")
        func everyFinishedSeenSurvivesAKill() async throws {
            let state = try ScheduleAuditTests.stateDirectory()
            defer { try? FileManager.default.removeItem(at: state) }
            let arguments = ["--state-dir", state.path]
            // Every announcement a client saw finish, with its outcome.
            var seen: [String: FinishReason] = [:]
            for kill in 0..<Self.kills {
                let daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
                let client = daemon.unixClient
                // Two queued behind each other, then one answered at its `finished` (?wait=true):
                // the kill comes the moment that answer is read, while the earlier rows were
                // written in the same or an earlier batch.
                var ids: [String] = []
                for word in ["Gate", "Platform"] {
                    let accepted = try await post(["text": "\(word) \(kill).", "queue": true], via: client)
                    #expect(accepted.status == 202 || accepted.status == 200, "\(accepted.status)")
                    ids.append(try accepted.decode(AnnouncementAccepted.self).id)
                }
                let answered = try await post(["text": "Track \(kill).", "queue": true], via: client, wait: true)
                let finished = try answered.decode(AnnouncementEvent.self)
                await daemon.stop(signal: SIGKILL)
                #expect(finished.type == .finished)
                seen[finished.id] = finished.reason
                // The two before it finished first: a client that read them saw them finished too.
                for id in ids { seen[id] = .completed }
            }

            let daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
            let byID = try await Self.auditRows(of: daemon)
            var lost: [String] = []
            for (id, reason) in seen where byID[id]?.reason != reason.rawValue {
                lost.append("\(id): \(String(describing: byID[id]?.reason)), seen \(reason.rawValue)")
            }
            #expect(lost.isEmpty, "rows lost or wrong after kill -9: \(lost.sorted())")
            #expect(seen.count == 3 * Self.kills)
            _ = await daemon.stop()
        }

        /// The promise as a client of the event stream sees it, one kill at a time: the moment
        /// an announcement's `finished` is read from `/v1/events` the daemon is killed, and the
        /// daemon started again on the same state directory has that announcement's row, with
        /// the outcome the event said. The restarted daemon serves the next round.
        @Test("kill -9 the moment each finished is read from the event stream: its row is there after the restart")
        func everyFinishedOnTheEventStreamSurvivesAKill() async throws {
            let state = try ScheduleAuditTests.stateDirectory()
            defer { try? FileManager.default.removeItem(at: state) }
            let arguments = ["--state-dir", state.path]
            var daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
            var lost: [String] = []
            for round in 0..<Self.kills {
                let client = daemon.unixClient
                let events = try await client.openEvents("/v1/events?progress=false")
                let accepted = try await post(["text": "Round \(round)."], via: client)
                #expect(accepted.status == 202 || accepted.status == 200, "\(accepted.status)")
                let id = try accepted.decode(AnnouncementAccepted.self).id
                var finished: AnnouncementEvent?
                for try await message in events {
                    guard let event = try? message.announcementEvent(), event.id == id, event.type == .finished
                    else { continue }
                    await daemon.stop(signal: SIGKILL)
                    finished = event
                    break
                }
                let seen = try #require(finished, "round \(round): the stream ended before \(id) finished")
                daemon = try await SpeakdProcess.start(audio: "null", arguments: arguments)
                let row = try await Self.auditRows(of: daemon)[id]
                if row?.reason != seen.reason?.rawValue || row?.finished == nil {
                    lost.append(
                        "round \(round), \(id): row \(String(describing: row?.reason)), seen \(String(describing: seen.reason))"
                    )
                }
            }
            #expect(lost.isEmpty, "rows lost or wrong after kill -9: \(lost)")
            _ = await daemon.stop()
        }

        /// Every row of `daemon`'s audit log, page by page, by announcement id.
        static func auditRows(of daemon: SpeakdProcess) async throws -> [String: AuditRecord] {
            var rows: [AuditRecord] = []
            var after: String?
            repeat {
                let response = try await daemon.unixClient.send(
                    "GET", "/v1/audit?limit=1000" + (after.map { "&after=\($0)" } ?? ""))
                #expect(response.status == 200)
                let page = try response.decode(AuditPage.self)
                rows += page.entries
                after = page.next
            } while after != nil
            return Dictionary(rows.compactMap { row in row.id.map { ($0, row) } }) { $1 }
        }
    }
}

/// How many kills each of `AuditKillTests`' tests makes, and the suite's time limit for them.
enum AuditKills {
    /// 16 by default, which keeps each test under about a minute; the full check is 200
    /// (`SPEAKD_AUDIT_KILLS=200`, docs/state.md).
    static var count: Int {
        ProcessInfo.processInfo.environment["SPEAKD_AUDIT_KILLS"].flatMap(Int.init) ?? 16
    }

    /// 5 minutes per 16 kills, 5 at the least.
    static var minutesAllowed: Int { 5 * max(1, (count + 15) / 16) }
}
