import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// `speak schedule` and `speak audit`, the real executable against the real daemon with a state directory.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct CLIScheduleTests {
        @Test(
            "speak schedule add, list and rm; the one-shot slot fires and speak audit shows it; a bad rule is refused naming rrule"
        )
        func scheduleThenAudit() async throws {
            let state = URL(fileURLWithPath: "/tmp").appendingPathComponent(
                "speakd-state-\(UUID().uuidString.prefix(8))")
            // 0700 whatever the umask (002 would make it group-writable, which speakd refuses).
            try FileManager.default.createDirectory(
                at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: state) }
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--state-dir", state.path])
            func speak(_ arguments: [String]) async throws -> BuiltProduct.Result {
                try await BuiltProduct.run("speak", arguments + ["--socket", daemon.socketPath])
            }

            let slot = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.up))
                .formatted(Date.ISO8601FormatStyle())
            let once = try await speak(["schedule", "add", "--at", slot, "--priority", "high", "Doors closing"])
            #expect(once.status == 0, "stderr: \(once.standardError)")
            let onceWords = once.standardOutput.split(separator: " ")
            #expect(onceWords.count == 3 && onceWords[1] == "next", "\(once.standardOutput)")
            let onceID = String(try #require(onceWords.first))
            let daily = try await speak([
                "schedule", "add", "--rrule", "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", "--time-zone", "Europe/Lisbon",
                "--name", "closing", "The shop closes in fifteen minutes",
            ])
            #expect(daily.status == 0, "stderr: \(daily.standardError)")
            let dailyID = String(try #require(daily.standardOutput.split(separator: " ").first))

            let list = try await speak(["schedule", "list"])
            #expect(list.status == 0, "stderr: \(list.standardError)")
            let rows = list.standardOutput.split(separator: "\n")
            #expect(rows.count == 3, "\(list.standardOutput)")
            #expect(
                rows.contains { $0.hasPrefix(onceID) && $0.contains("at \(slot)") && $0.hasSuffix("Doors closing") })
            #expect(
                rows.contains {
                    $0.hasPrefix(dailyID) && $0.contains("closing")
                        && $0.contains("FREQ=DAILY;BYHOUR=17;BYMINUTE=45 in Europe/Lisbon")
                }, "\(list.standardOutput)")

            // The slot comes, the announcement is spoken (to the null sink) and its row is finished.
            var entries: [AuditRecord] = []
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                let audit = try await speak(["audit", "--front", "schedule", "--json"])
                #expect(audit.status == 0, "stderr: \(audit.standardError)")
                entries = try WireFormat.decoder().decode(AuditPage.self, from: Data(audit.standardOutput.utf8)).entries
                if entries.contains(where: { $0.reason != nil }) { break }
                try await Task.sleep(for: .milliseconds(250))
            }
            #expect(entries.count == 1, "\(entries)")
            let fired = try #require(entries.first)
            #expect(fired.front == "schedule" && fired.reason == "completed" && fired.schedule == onceID, "\(fired)")
            let audit = try await speak(["audit", "--front", "schedule"])
            #expect(audit.status == 0, "stderr: \(audit.standardError)")
            let line = try #require(audit.standardOutput.split(separator: "\n").first.map(String.init))
            #expect(
                line.contains("  \(try #require(fired.id))  schedule  id=\(onceID) slot=")
                    && line.hasSuffix("  default  completed  Doors closing"), "\(audit.standardOutput)")

            let removed = try await speak(["schedule", "rm", dailyID])
            #expect(removed.status == 0 && removed.standardOutput == "\(dailyID) removed\n", "\(removed)")
            let listed = try await speak(["schedule", "list", "--json"])
            #expect(listed.standardOutput.contains(onceID) && !listed.standardOutput.contains(dailyID))
            let again = try await speak(["schedule", "rm", dailyID])
            #expect(again.status == 1 && again.standardError.contains(dailyID), "\(again)")

            let bad = try await speak(["schedule", "add", "--rrule", "FREQ=DAILY;BYWEEKNO=3", "Never"])
            #expect(bad.status != 0 && bad.standardError.contains("rrule"), "\(bad)")
            let (status, _) = await daemon.stop()
            #expect(status == 0, "\(daemon.log)")
        }
    }
}
