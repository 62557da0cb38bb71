import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// What the real daemon's worker template and workers hold and are: a template started again
    /// while the daemon is serving holds none of its descriptors, and every worker runs without
    /// capabilities (as `nobody` when the daemon runs as root), under seccomp and no_new_privs.
    @Suite(.serialized, .timeLimit(.minutes(1)))
    struct EngineSandboxDaemonTests {
        /// The daemon's worker template is its only child; the workers are the template's children.
        static func waitForWorkers(of template: pid_t, count: Int) async throws -> [pid_t] {
            let workers = try await eventually {
                let workers = ProcessTable.children(of: template)
                return workers.count == count ? workers : nil
            }
            if let workers { return workers }
            Issue.record("template \(template) has workers \(ProcessTable.children(of: template)), expected \(count)")
            return ProcessTable.children(of: template)
        }

        /// What `find` finds, asked every 20 ms for 10 s at most; nil when it found nothing.
        static func eventually<T>(_ find: () -> T?) async throws -> T? {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if let found = find() { return found }
                try await Task.sleep(for: .milliseconds(20))
            }
            return find()
        }

        /// The daemon's worker template other than `old`, once the pool has started it: it may
        /// start just after the render that needed it is answered, by a worker still running.
        static func waitForTemplate(of daemon: pid_t, replacing old: pid_t) async throws -> pid_t {
            try #require(
                await eventually { ProcessTable.children(of: daemon).first { $0 != old } },
                "no template replaced \(old) within 10 s: the daemon's children are \(ProcessTable.children(of: daemon))"
            )
        }

        @Test(
            "As root, speakd refuses to start with an engine worker user that does not exist or is root, naming the setting",
            .enabled(if: getuid() == 0, "only root changes the workers' user"),
            arguments: [
                ("speakd-no-such-user", "--engine-worker-user: no user 'speakd-no-such-user' on this system"),
                ("root", "--engine-worker-user: 'root' is root; engine workers never run as root"),
            ])
        func workerUserMustBeUnprivileged(user: String, message: String) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-user-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let log = directory.appendingPathComponent("speakd.log").path
            let process = try ChildProcess(
                BuiltProduct.path("speakd"),
                [
                    "--socket", directory.appendingPathComponent("speakd.sock").path, "--http", "none", "--audio",
                    "null", "--engine-worker-user", user,
                ],
                environment: ProcessInfo.processInfo.environment.merging(["RUNTIME_DIRECTORY": directory.path]) { $1 },
                output: log)
            let status = await process.wait(timeout: .seconds(20))
            #expect(status != nil && status != 0)
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(output.contains(message), "\(output)")
        }

        @Test(
            "A template started again after the first was killed holds none of the daemon's descriptors, nor do its workers"
        )
        func respawnedTemplateHoldsNothingOfTheDaemon() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null", arguments: ["--engine-workers", "2"])
            defer { Task { await speakd.stop() } }
            // Clients with connections open when the template is started again: idle ones on both
            // listeners, and one holding an event stream.
            var connections: [RawConnection] = []
            defer { for connection in connections { connection.close() } }
            for _ in 0..<3 {
                connections.append(try RawConnection(.unixSocket(path: speakd.socketPath)))
                connections.append(try RawConnection(.tcp(host: "127.0.0.1", port: speakd.port)))
            }
            let stream = try RawConnection(.unixSocket(path: speakd.socketPath))
            connections.append(stream)
            stream.send("GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n")

            let first = try #require(ProcessTable.children(of: speakd.pid).first)
            _ = try await Self.waitForWorkers(of: first, count: 2)
            // Its two listeners, the clients above (once accepted) and the template's control socket.
            var daemonSockets: Set<String> = []
            let accepted = ContinuousClock.now + .seconds(5)
            while daemonSockets.count < 10 && ContinuousClock.now < accepted {
                try await Task.sleep(for: .milliseconds(20))
                daemonSockets = Set(ProcessTable.descriptors(of: speakd.pid).values.filter { $0.hasPrefix("socket:") })
            }
            #expect(daemonSockets.count >= 10, "\(daemonSockets)")
            kill(first, SIGKILL)
            // The pool starts a new template when it needs a worker.
            let render = try await speakd.unixClient.send("POST", "/v1/speech", json: ["text": "Again"])
            #expect(render.status == 200)
            let template = try await Self.waitForTemplate(of: speakd.pid, replacing: first)
            let workers = try await Self.waitForWorkers(of: template, count: 2)

            for pid in [template] + workers {
                // A worker the template has just forked holds the template's descriptors until it
                // has taken its pipes as its standard streams and closed the rest, before it says
                // it is ready: wait for that, for 10 s at most, then look.
                if pid != template {
                    _ = try await Self.eventually { () -> Bool? in
                        let held = ProcessTable.descriptors(of: pid)
                        let settled =
                            held[0]?.hasPrefix("pipe:") == true
                            && held.allSatisfy { $0.key <= 2 || $0.value.contains("espeak") }
                        return settled ? true : nil
                    }
                }
                let held = ProcessTable.descriptors(of: pid)
                // The template's control socket is its standard input and output; a worker has
                // pipes. Above the standard streams: the data directory, and the template's signalfd.
                let sockets = held.filter { $0.value.hasPrefix("socket:") }
                let own: Set<Int32> = pid == template ? [0, 1] : []
                #expect(Set(sockets.keys).isSubset(of: own), "\(pid) holds \(held)")
                #expect(Set(sockets.values).isDisjoint(with: daemonSockets), "\(pid) holds \(held)")
                let others = held.filter { descriptor, target in
                    descriptor > 2 && !target.contains("espeak") && target != "anon_inode:[signalfd]"
                }
                #expect(others.isEmpty, "\(pid) holds \(held)")
            }
            // A real worker: no capability, as root not root, seccomp and no_new_privs.
            let nobody = getuid() == 0 ? getpwnam("nobody").map { $0.pointee.pw_uid } : getuid()
            for worker in workers {
                let status = ProcessTable.status(of: worker)
                #expect(status["Uid"] == nobody.map { "\($0)" }, "\(status)")
                #expect(status["CapEff"] == "0000000000000000" && status["CapPrm"] == "0000000000000000")
                if getuid() == 0 { #expect(status["CapBnd"] == "0000000000000000", "\(status)") }
                #expect(status["NoNewPrivs"] == "1" && status["Seccomp"] == "2", "\(status)")
            }
            // And it renders.
            let again = try await speakd.unixClient.send("POST", "/v1/speech", json: ["text": "Still here"])
            #expect(again.status == 200)
        }

        @Test(
            "SPEAKD_ENGINE_SANDBOX=without-seccomp (for qemu-user) leaves out the filter alone, and says so; another value is refused by name"
        )
        func sandboxWithoutSeccomp() async throws {
            let speakd = try await SpeakdProcess.start(
                audio: "null", arguments: ["--engine-workers", "1"],
                environment: ["SPEAKD_ENGINE_SANDBOX": "without-seccomp"])
            let template = try #require(ProcessTable.children(of: speakd.pid).first)
            let worker = try #require(try await Self.waitForWorkers(of: template, count: 1).first)
            let status = ProcessTable.status(of: worker)
            #expect(status["Seccomp"] == "0" && status["NoNewPrivs"] == "1", "\(status)")
            #expect(status["CapEff"] == "0000000000000000", "\(status)")
            let render = try await speakd.unixClient.send("POST", "/v1/speech", json: ["text": "Gate four"])
            #expect(render.status == 200)
            let health = try await speakd.unixClient.send("GET", "/healthz")
            let sandbox = try JSONDecoder().decode(HealthReport.self, from: Data(health.body)).engine.workers?.sandbox
            #expect(
                sandbox?.contains("no_new_privs") == true && sandbox?.contains("seccomp") == false, "\(sandbox ?? "")")
            _ = await speakd.stop()
            #expect(
                speakd.log.contains(
                    "SPEAKD_ENGINE_SANDBOX=without-seccomp: the workers run without their seccomp filter"))

            // Any other value: the template does not start, and says why.
            do {
                let refused = try await SpeakdProcess.start(
                    audio: "null", arguments: ["--engine-workers", "1"], environment: ["SPEAKD_ENGINE_SANDBOX": "off"],
                    timeout: .seconds(8))
                _ = await refused.stop()
                Issue.record("speakd was healthy with SPEAKD_ENGINE_SANDBOX=off")
            } catch {
                #expect(
                    "\(error)".contains(
                        "SPEAKD_ENGINE_SANDBOX=off: the only value it takes is 'without-seccomp' (unset: every layer)"),
                    "\(error)")
            }
        }
    }
}
