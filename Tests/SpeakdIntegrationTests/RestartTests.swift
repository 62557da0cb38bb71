import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// What a restart and a second start look like from outside.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct RestartTests {
        /// Starts a second `speakd` with `arguments` and waits up to 5 s for it to exit: its
        /// status (nil if it did not), how long that took, and what it logged.
        static func runSecond(_ arguments: [String], log: String) async throws -> (Int32?, Duration, String) {
            let started = ContinuousClock.now
            let second = try ChildProcess(
                BuiltProduct.path("speakd"), arguments,
                environment: ProcessInfo.processInfo.environment.filter { $0.key != "NOTIFY_SOCKET" }, output: log)
            let status = await second.wait(timeout: .seconds(5))
            let took = ContinuousClock.now - started
            if status == nil { await second.terminate(grace: .zero) }
            return (status, took, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }

        @Test("Event ids after a restart never equal those before; a client resuming across it sees the new epoch")
        func eventIDsAcrossRestart() async throws {
            let first = try await SpeakdProcess.start(audio: "null")
            let before = try await postAndReadIDs(first, count: 3)
            await first.stop()

            let second = try await SpeakdProcess.start(audio: "null")
            defer { Task { await second.stop() } }
            let after = try await postAndReadIDs(second, count: 3)
            #expect(Set(before.map(\.description)).isDisjoint(with: after.map(\.description)), "\(before) \(after)")
            #expect(before.allSatisfy { $0.epoch != nil && $0.epoch == before[0].epoch })
            #expect(after.allSatisfy { $0.epoch != nil && $0.epoch != before[0].epoch })

            // Resuming with the last id of the first run: this run's events from its first one,
            // under another epoch, which is how the client knows it missed what happened between.
            let last = try #require(before.last)
            var resumed: [EventID] = []
            for try await message in second.unixClient.events(lastEventID: last.description) {
                resumed.append(try #require(message.eventID))
                if resumed.count == after.count { break }
            }
            #expect(resumed.map(\.sequence) == [1, 2, 3])
            #expect(resumed.allSatisfy { $0.epoch == after[0].epoch && $0.epoch != last.epoch })
        }

        @Test("A second speakd on a live socket exits 1 within 2 s, naming the socket; the first keeps it")
        func secondInstanceExits() async throws {
            let first = try await SpeakdProcess.start(audio: "null")
            defer { Task { await first.stop() } }
            let log = first.directory.appendingPathComponent("second.log").path
            let (status, took, output) = try await Self.runSecond(
                ["--socket", first.socketPath, "--http", "none", "--audio", "null"], log: log)
            #expect(status == 1, "status \(String(describing: status)):\n\(output)")
            #expect(took < .seconds(2), "took \(took)")
            #expect(output.contains("another speakd answers on the socket \(first.socketPath)"), "\(output)")
            #expect(try await first.unixClient.send("GET", "/healthz").status == 200)
            #expect(FileManager.default.fileExists(atPath: first.socketPath))
        }

        @Test("A second speakd on a port in use exits 1 within 2 s, naming the address")
        func portInUseExits() async throws {
            let first = try await SpeakdProcess.start(audio: "null")
            defer { Task { await first.stop() } }
            let log = first.directory.appendingPathComponent("second.log").path
            let (status, took, output) = try await Self.runSecond(
                [
                    "--socket", "none", "--http", "127.0.0.1:\(first.port)", "--audio", "null",
                    "--token-file", first.directory.appendingPathComponent("second-token").path,
                ], log: log)
            #expect(status == 1, "status \(String(describing: status)):\n\(output)")
            #expect(took < .seconds(2), "took \(took)")
            #expect(output.contains("cannot listen on 127.0.0.1:\(first.port)"), "\(output)")
        }

        @Test("The socket's missing directory under XDG_RUNTIME_DIR is created, mode 0700, before binding")
        func createsRuntimeDirectory() async throws {
            let runtime = FileManager.default.temporaryDirectory.appendingPathComponent(
                "speakd-xdg-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: false)
            defer { try? FileManager.default.removeItem(at: runtime) }
            let socket = runtime.appendingPathComponent("speakd/speakd.sock").path
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_RUNTIME_DIR"] = runtime.path
            environment["RUNTIME_DIRECTORY"] = nil
            environment["NOTIFY_SOCKET"] = nil
            let log = runtime.appendingPathComponent("speakd.log").path
            let daemon = try ChildProcess(
                BuiltProduct.path("speakd"), ["--socket", socket, "--http", "none", "--audio", "null"],
                environment: environment, output: log)
            let client = SpeakHTTPClient(endpoint: .unixSocket(path: socket), timeout: .seconds(2))
            var healthy = false
            let deadline = ContinuousClock.now + .seconds(20)
            while !healthy, ContinuousClock.now < deadline, daemon.isRunning {
                healthy = (try? await client.send("GET", "/healthz").status) == 200
                if !healthy { try await Task.sleep(for: .milliseconds(50)) }
            }
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(healthy, "\(output)")
            let attributes = try FileManager.default.attributesOfItem(
                atPath: runtime.appendingPathComponent("speakd").path)
            #expect((attributes[.posixPermissions] as? Int) == 0o700)
            daemon.send(SIGTERM)
            #expect(await daemon.wait(timeout: .seconds(10)) == 0)
        }

        /// Posts `count` short announcements and reads their `queued` events' ids from the whole history.
        private func postAndReadIDs(_ speakd: SpeakdProcess, count: Int) async throws -> [EventID] {
            for index in 0..<count {
                let response = try await post(announcement("Number \(index)"), via: speakd.unixClient, wait: true)
                #expect(response.status == 200)
            }
            var ids: [EventID] = []
            for try await message in speakd.unixClient.events(lastEventID: "0") where message.event == "queued" {
                ids.append(try #require(message.eventID))
                if ids.count == count { break }
            }
            return ids
        }
    }
}
