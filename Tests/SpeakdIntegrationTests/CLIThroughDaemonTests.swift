import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// The `speak` executable talking to the real daemon over its Unix socket.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct CLIThroughDaemonTests {
        static let longText = SpeakdIntegration.FinishReasonTests.longText

        /// Runs `speak` with `--socket` pointing at the daemon, in the audio server's environment.
        func speak(_ speakd: AudibleDaemon, _ arguments: [String]) async throws -> BuiltProduct.Result {
            try await BuiltProduct.run(
                "speak", arguments + ["--socket", speakd.daemon.socketPath], environment: speakd.pulse.environment)
        }

        func startSpeak(_ speakd: AudibleDaemon, _ arguments: [String]) throws -> RunningProduct {
            try BuiltProduct.start(
                "speak", arguments + ["--socket", speakd.daemon.socketPath], environment: speakd.pulse.environment)
        }

        /// The JSON finished event a `--wait` run printed.
        func finishedEvent(in output: String) throws -> AnnouncementEvent {
            let line = try #require(output.split(separator: "\n").last { $0.hasPrefix("{") }, "no JSON in: \(output)")
            return try WireFormat.decoder().decode(AnnouncementEvent.self, from: Data(line.utf8))
        }

        @Test("speak --wait through the daemon: exit 0, prints the finished event, heard once")
        func waitCompleted() async throws {
            let speakd = try await AudibleDaemon.start()
            let result = try await speak(speakd, ["--wait", "Doors closing"])
            let recording = await speakd.stop()

            #expect(result.status == 0, "stderr: \(result.standardError)")
            let finished = try finishedEvent(in: result.standardOutput)
            #expect(finished.type == .finished && finished.success == true && finished.reason == .completed)
            #expect(finished.text == "Doors closing")
            // It went through the daemon, not the in-process fallback.
            #expect(speakd.events.events.filter { $0.type == .finished }.map(\.id) == [finished.id])
            expectExactlyOneFinished([finished.id], in: speakd.events.events)
            #expect(recording.segments().count == 1, "heard \(recording.segments())")
        }

        @Test(
            "speak pause and speak resume act on the speaking one, by id or by output; errors exit 1 or 2 (bad input) naming why"
        )
        func pauseAndResume() async throws {
            let speakd = try await AudibleDaemon.start()
            let id = try await speakd.accept(announcement(Self.longText))
            _ = try #require(await speakd.events.waitFor(.started, of: id))
            try await Task.sleep(for: .milliseconds(400))
            let paused = try await speak(speakd, ["pause", "--to", "default"])
            let pausedTwice = try await speak(speakd, ["pause", id])
            let unknownOutput = try await speak(speakd, ["resume", "--to", "hall"])
            let both = try await speak(speakd, ["resume", "--to", "default", id])
            let resumed = try await speak(speakd, ["resume"])
            let finished = try #require(await speakd.events.waitFor(.finished, of: id, timeout: .seconds(30)))
            _ = await speakd.stop()

            #expect(paused.status == 0, "stderr: \(paused.standardError)")
            #expect(paused.standardOutput.contains("\"paused\""), "\(paused.standardOutput)")
            #expect(pausedTwice.status == 1 && pausedTwice.standardError.contains("paused already"))
            #expect(
                unknownOutput.status == 2 && unknownOutput.standardError.contains("'hall'"),
                "status \(unknownOutput.status) stdout \(unknownOutput.standardOutput) stderr \(unknownOutput.standardError)"
            )
            #expect(both.status != 0 && both.standardError.contains("--to goes without an id"), "\(both)")
            #expect(resumed.status == 0, "stderr: \(resumed.standardError)")
            #expect(finished.event.reason == .completed)
            let lifecycle = speakd.events.events(for: id).filter { !$0.type.isProgress }.map(\.type)
            #expect(lifecycle == [.queued, .started, .paused, .resumed, .finished])
        }

        @Test("speak status --to and speak events --to show one output; an unknown output fails naming it")
        func statusAndEventsOfOneOutput() async throws {
            let speakd = try await AudibleDaemon.start()
            let id = try await speakd.accept(announcement("Doors closing"))
            let status = try await speak(speakd, ["status", "--to", "default"])
            let events = try await speak(speakd, ["events", "--to", "default", "--after", "0", "--count", "1"])
            let unknownStatus = try await speak(speakd, ["status", "--to", "hall"])
            let unknownEvents = try await speak(speakd, ["events", "--to", "hall", "--count", "1"])
            #expect(await speakd.events.waitForFinished([id]))
            _ = await speakd.stop()

            #expect(status.status == 0, "stderr: \(status.standardError)")
            let list = try #require(status.standardOutput.split(separator: "\n").last)
            let announcements = try JSONDecoder().decode(AnnouncementList.self, from: Data(list.utf8)).announcements
            #expect(announcements.allSatisfy { $0.output == "default" }, "\(announcements)")
            #expect(events.status == 0, "stderr: \(events.standardError)")
            let first = try JSONDecoder().decode(AnnouncementEvent.self, from: Data(events.standardOutput.utf8))
            #expect(first.type == .queued && first.id == id && first.output == "default", "\(first)")
            for failed in [unknownStatus, unknownEvents] {
                #expect(
                    failed.status != 0 && failed.standardError.contains("'hall'"),
                    "status \(failed.status) stdout \(failed.standardOutput) stderr \(failed.standardError)")
            }
        }

        @Test("speak --wait exits 1 when its announcement is interrupted")
        func waitInterrupted() async throws {
            let speakd = try await AudibleDaemon.start()
            let waiting = try startSpeak(speakd, ["--wait", Self.longText])
            let started = try #require(
                await speakd.events.wait { $0.contains { $0.type == .started } }
                    ? speakd.events.events.first { $0.type == .started } : nil)
            try await Task.sleep(for: .milliseconds(500))
            let interrupter = try await speakd.accept(announcement("Platform change", priority: .high), via: speakd.tcp)
            let result = try await waiting.wait(timeout: .seconds(30))
            #expect(await speakd.events.waitForFinished([interrupter]))
            _ = await speakd.stop()
            expectExactlyOneFinished([started.id, interrupter], in: speakd.events.events)

            #expect(result.status == 1, "stdout: \(result.standardOutput) stderr: \(result.standardError)")
            let finished = try finishedEvent(in: result.standardOutput)
            #expect(finished.id == started.id && finished.success == false && finished.reason == .interrupted)
        }

        @Test("speak cancel ID: prints the count; the waiting speak --wait exits 1 with cancelled")
        func cancelOne() async throws {
            let speakd = try await AudibleDaemon.start()
            let waiting = try startSpeak(speakd, ["--wait", Self.longText])
            _ = await speakd.events.wait { $0.contains { $0.type == .started } }
            let id = try #require(speakd.events.events.first { $0.type == .started }?.id)

            let cancel = try await speak(speakd, ["cancel", id])
            #expect(cancel.status == 0, "stderr: \(cancel.standardError)")
            #expect(
                try WireFormat.decoder().decode(CancelResult.self, from: Data(cancel.standardOutput.utf8)).cancelled
                    == 1)
            let result = try await waiting.wait(timeout: .seconds(30))
            _ = await speakd.stop()

            #expect(result.status == 1, "stdout: \(result.standardOutput) stderr: \(result.standardError)")
            let finished = try finishedEvent(in: result.standardOutput)
            #expect(finished.id == id && finished.success == false && finished.reason == .cancelled)
            expectExactlyOneFinished([id], in: speakd.events.events)
        }

        @Test("speak cancel --all cancels the speaking and every waiting announcement")
        func cancelAll() async throws {
            let speakd = try await AudibleDaemon.start()
            let ids = [
                try await speakd.accept(announcement(Self.longText)),
                try await speakd.accept(announcement("Second", priority: .low), via: speakd.tcp),
                try await speakd.accept(announcement("Third")),
            ]
            _ = try #require(await speakd.events.waitFor(.started, of: ids[0]))
            let cancel = try await speak(speakd, ["cancel", "--all"])
            #expect(await speakd.events.waitForFinished(ids))
            _ = await speakd.stop()

            #expect(cancel.status == 0, "stderr: \(cancel.standardError)")
            #expect(
                try WireFormat.decoder().decode(CancelResult.self, from: Data(cancel.standardOutput.utf8)).cancelled
                    == 3)
            for id in ids {
                #expect(speakd.events.finished(id).first?.reason == .cancelled)
            }
            expectExactlyOneFinished(ids, in: speakd.events.events)
        }

        @Test("connection options before the subcommand: speak --socket S status and cancel --all speak nothing")
        func optionsBeforeTheSubcommand() async throws {
            let speakd = try await AudibleDaemon.start()
            let speaking = try await speakd.accept(announcement(Self.longText))
            _ = try #require(await speakd.events.waitFor(.started, of: speaking))
            let socket = ["--socket", speakd.daemon.socketPath]
            let status = try await BuiltProduct.run(
                "speak", socket + ["status"], environment: speakd.pulse.environment)
            let cancel = try await BuiltProduct.run(
                "speak", socket + ["cancel", "--all"], environment: speakd.pulse.environment)
            #expect(await speakd.events.waitForFinished([speaking]))
            _ = await speakd.stop()

            #expect(status.status == 0, "stderr: \(status.standardError)")
            #expect(
                status.standardOutput.contains("daemon: unix:\(speakd.daemon.socketPath)"), "\(status.standardOutput)")
            #expect(cancel.status == 0, "stderr: \(cancel.standardError)")
            #expect(
                try WireFormat.decoder().decode(CancelResult.self, from: Data(cancel.standardOutput.utf8)).cancelled
                    == 1)
            #expect(speakd.events.finished(speaking).first?.reason == .cancelled)
            // Neither word was announced: the test's own announcement is the only one the daemon saw.
            #expect(Set(speakd.events.events.map(\.id)) == [speaking])
            expectExactlyOneFinished([speaking], in: speakd.events.events)
        }

        @Test("speak --json: the daemon's message for an unknown key, exit 2; the file's priority is kept")
        func jsonIsARequestBody() async throws {
            let speakd = try await AudibleDaemon.start()
            let directory = speakd.daemon.directory
            let misspelt = #"{"text":"Doors closing","pich":1.6}"#
            let daemonAnswer = try await speakd.unix.send(
                "POST", "/v1/announcements", headers: [("Content-Type", "application/json")],
                body: Array(misspelt.utf8))
            let misspeltFile = directory.appendingPathComponent("misspelt.json")
            try Data(misspelt.utf8).write(to: misspeltFile)
            let refused = try await speak(speakd, ["--json", misspeltFile.path])

            let urgentFile = directory.appendingPathComponent("urgent.json")
            try Data(#"{"text":"Platform change","priority":"high","expiresAfter":60}"#.utf8).write(to: urgentFile)
            let urgent = try await speak(speakd, ["--json", urgentFile.path, "--wait"])
            _ = await speakd.stop()

            #expect(daemonAnswer.status == 422)
            let daemonError = try #require(daemonAnswer.error, "\(String(decoding: daemonAnswer.body, as: UTF8.self))")
            #expect(refused.status == 2, "stderr: \(refused.standardError)")
            #expect(
                refused.standardError.contains("--json \(misspeltFile.path): \(daemonError.description)"),
                "speak said \(refused.standardError); the daemon said \(daemonError)")

            #expect(urgent.status == 0, "stderr: \(urgent.standardError)")
            let finished = try finishedEvent(in: urgent.standardOutput)
            #expect(finished.priority == .high)
            #expect(speakd.events.events.filter { $0.type == .queued }.map(\.priority) == [.high])
            expectExactlyOneFinished([finished.id], in: speakd.events.events)
        }

        @Test("speak events --count N prints N events as JSON lines and exits 0")
        func events() async throws {
            let speakd = try await AudibleDaemon.start()
            let follower = try startSpeak(speakd, ["events", "--count", "3"])
            // The recorder's stream and the CLI's.
            try await speakd.daemon.waitForEventStreams(2)
            let id = try await speakd.accept(announcement("Doors closing"))
            let result = try await follower.wait(timeout: .seconds(30))
            _ = await speakd.stop()

            #expect(result.status == 0, "stderr: \(result.standardError)")
            let lines = result.standardOutput.split(separator: "\n")
            #expect(lines.count == 3)
            let printed = try lines.map { try WireFormat.decoder().decode(AnnouncementEvent.self, from: Data($0.utf8)) }
            #expect(printed.map(\.type) == [.queued, .started, .finished])
            #expect(printed.allSatisfy { $0.id == id })
            expectExactlyOneFinished([id], in: speakd.events.events)
        }

        @Test("speak status shows the daemon, its health and its queue")
        func status() async throws {
            let speakd = try await AudibleDaemon.start()
            let speaking = try await speakd.accept(announcement(Self.longText))
            let waiting = try await speakd.accept(announcement("Next stop Central", priority: .low))
            _ = try #require(await speakd.events.waitFor(.started, of: speaking))
            let result = try await speak(speakd, ["status"])
            _ = await speakd.stop()

            #expect(result.status == 0, "stderr: \(result.standardError)")
            #expect(result.standardOutput.contains("daemon: unix:\(speakd.daemon.socketPath)"))
            #expect(result.standardOutput.contains("\"status\":\"ok\""), "\(result.standardOutput)")
            let listLine = try #require(result.standardOutput.split(separator: "\n").last)
            let list = try WireFormat.decoder().decode(AnnouncementList.self, from: Data(listLine.utf8))
            #expect(list.announcements.map(\.id) == [speaking, waiting])
            #expect(list.announcements.map(\.state) == [.speaking, .queued])
            // Stopping the daemon finished both.
            expectExactlyOneFinished([speaking, waiting], in: speakd.events.events)
        }
    }
}
