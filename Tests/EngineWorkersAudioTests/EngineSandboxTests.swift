import Foundation
import SpeakTestSupport
import Testing

/// The sandbox entered by a real process (`speakd-sandbox-probe`, which makes the calls
/// `speakd-engine-worker` makes, in the same order), on this machine's kernel. The daemon's own
/// workers: `EngineSandboxDaemonTests`.
@Suite("Engine worker sandbox", .serialized, .timeLimit(.minutes(1)))
struct EngineSandboxTests {
    /// The user a worker runs as: `nobody` when the tests run as root, else the tests' own.
    static var workerUser: (uid: uid_t, gid: gid_t) {
        guard getuid() == 0, let entry = getpwnam("nobody") else { return (getuid(), getgid()) }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// `status NAME VALUE…` lines as NAME → first VALUE.
    static func fields(_ lines: [String]) -> [String: String] {
        var fields: [String: String] = [:]
        for line in lines where line.hasPrefix("status ") {
            let parts = line.split(whereSeparator: \.isWhitespace)
            if parts.count >= 3 { fields[String(parts[1])] = String(parts[2]) }
        }
        return fields
    }

    /// Another process of the worker's user, for the probe to try to signal, re-limit and
    /// reschedule: as root, `sleep` started as `nobody` (setpriv), so that only the sandbox
    /// stands between them, not the permission checks between users.
    static func startTarget() async throws -> ChildProcess {
        let user = workerUser
        let target =
            getuid() == 0
            ? try ChildProcess(
                "/usr/bin/setpriv",
                ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", "/bin/sleep", "60"],
                environment: [:])
            : try ChildProcess("/bin/sleep", ["60"], environment: [:])
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            let comm = (try? String(contentsOfFile: "/proc/\(target.pid)/comm", encoding: .utf8)) ?? ""
            if comm.hasPrefix("sleep"), ProcessTable.status(of: target.pid)["Uid"] == "\(user.uid)" { return target }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw SpeakdProcess.Failure(description: "the target process did not become sleep as uid \(user.uid)")
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

    static func probe(as mode: String) async throws -> (outcomes: [String: String], status: [String: String]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-sandbox-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("inside".utf8).write(to: directory.appendingPathComponent("inside.txt"))
        let outside = directory.deletingLastPathComponent().appendingPathComponent("speakd-outside-\(UUID())")
        try Data("outside".utf8).write(to: outside)
        defer { try? FileManager.default.removeItem(at: outside) }
        let target = try await startTarget()
        let before = observable(target.pid)
        let result = try await BuiltProduct.run(
            "speakd-sandbox-probe", ["--as", mode, directory.path, outside.path, "\(target.pid)"])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        // Nothing reached the other process: alive, not stopped, its limits and scheduling as they were.
        try await Task.sleep(for: .milliseconds(50))
        #expect(target.isRunning)
        #expect(observable(target.pid) == before, "\(before) became \(observable(target.pid))")
        kill(target.pid, SIGKILL)
        _ = await target.wait(timeout: .seconds(5))
        var outcomes: [String: String] = [:]
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        for line in lines where !line.hasPrefix("status ") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { outcomes[String(parts[0])] = String(parts[1]) }
        }
        return (outcomes, fields(lines))
    }

    /// Refused everywhere: by seccomp (and Landlock for files where the kernel has it).
    static let refusedEverywhere = [
        "write-inside", "create-tmp", "unlink-inside", "tcp-socket", "unix-socket", "socketpair", "exec",
        "setsockopt-held", "shutdown-held", "pidfd-other", "relimit-other", "renice-other", "renice-group",
        "reschedule-other", "affinity-other", "setown-other", "setsig-held", "fiosetown-other", "ptrace-other",
        "read-memory-other", "signal-group", "signal-all", "signal-parent", "setuid-root",
    ]
    /// Signals to another process of the same user: refused by a worker's seccomp filter, and in
    /// the template by Landlock's signal scope (ABI 6).
    static let signalsToOthers = ["signal-other", "tgkill-other", "sigqueue-other", "tgsigqueue-other"]

    @Test(
        "Inside the sandbox a process reads beneath its paths and starts threads; it cannot write, exec, open a socket, or signal, re-limit, renice or reschedule another process",
        arguments: ["process", "worker", "template"])
    func confines(mode: String) async throws {
        // worker: as the template forks it, confined by the template's filter and its own.
        // template: the template itself, which forks the workers and never sees a job.
        let (outcomes, status) = try await Self.probe(as: mode)
        let report = try #require(outcomes["report"])
        #expect(report.contains("no_new_privs") && report.contains("seccomp"), "\(report)")
        let scoped = report.contains("signals and abstract sockets scoped")
        var refused = Self.refusedEverywhere
        var allowed = ["read-inside", "list-inside", "thread", "signal-self", "relimit-self"]
        if mode == "template" {
            // It forks the workers and talks to the daemon on its socket.
            allowed += ["fork", "sendmsg-held"]
            if scoped { refused += Self.signalsToOthers }
        } else {
            refused += Self.signalsToOthers + ["fork", "sendmsg-held"]
        }
        for name in allowed {
            #expect(outcomes[name] == "allowed", "\(name): \(String(describing: outcomes[name]))")
        }
        for name in refused {
            #expect(outcomes[name]?.hasPrefix("refused") == true, "\(name): \(String(describing: outcomes[name]))")
        }
        // Landlock where the kernel has it (this project's machines do); the report says when not.
        if report.contains("landlock ABI") {
            #expect(
                outcomes["read-outside"]?.hasPrefix("refused") == true,
                "\(String(describing: outcomes["read-outside"]))")
        } else {
            #expect(report.contains("no landlock ("))
        }
        // No capability, no way to gain one, and as root, not root.
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            #expect(status[set] == "0000000000000000", "\(set): \(String(describing: status[set]))")
        }
        if getuid() == 0 {
            #expect(status["CapBnd"] == "0000000000000000", "\(String(describing: status["CapBnd"]))")
            #expect(report.contains("user nobody"), "\(report)")
        }
        #expect(status["Uid"] == "\(Self.workerUser.uid)")
        #expect(status["NoNewPrivs"] == "1")
        #expect(status["Seccomp"] == "2")
    }
}
