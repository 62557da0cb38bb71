import Foundation
import SpeakTestSupport
import Testing

/// The sandbox entered by a real process (`speakd-sandbox-probe`), on this machine's kernel.
@Suite("Engine worker sandbox", .timeLimit(.minutes(1)))
struct EngineSandboxTests {
    static func probe(forked: Bool) async throws -> [String: String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-sandbox-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("inside".utf8).write(to: directory.appendingPathComponent("inside.txt"))
        let outside = directory.deletingLastPathComponent().appendingPathComponent("speakd-outside-\(UUID())")
        try Data("outside".utf8).write(to: outside)
        defer { try? FileManager.default.removeItem(at: outside) }
        let result = try await BuiltProduct.run(
            "speakd-sandbox-probe", (forked ? ["--forked"] : []) + [directory.path, outside.path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        var outcomes: [String: String] = [:]
        for line in result.standardOutput.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { outcomes[String(parts[0])] = String(parts[1]) }
        }
        return outcomes
    }

    @Test(
        "Inside the sandbox a process reads beneath its paths and starts threads, and nothing else",
        arguments: [false, true])
    func confines(forkedFromTemplate: Bool) async throws {
        // true: a worker as the template forks it, confined by the template's filter and its own.
        let outcomes = try await Self.probe(forked: forkedFromTemplate)
        let report = try #require(outcomes["report"])
        #expect(report.contains("no_new_privs") && report.contains("seccomp"), "\(report)")
        for allowed in ["read-inside", "list-inside", "thread", "signal-self"] {
            #expect(outcomes[allowed] == "allowed", "\(allowed): \(String(describing: outcomes[allowed]))")
        }
        for refused in [
            "write-inside", "create-tmp", "unlink-inside", "tcp-socket", "unix-socket", "exec", "fork", "signal-init",
        ] {
            #expect(
                outcomes[refused]?.hasPrefix("refused") == true, "\(refused): \(String(describing: outcomes[refused]))")
        }
        // Landlock where the kernel has it (this project's machines do); the report says when not.
        if report.contains("landlock ABI") {
            #expect(
                outcomes["read-outside"]?.hasPrefix("refused") == true,
                "\(String(describing: outcomes["read-outside"]))")
        } else {
            #expect(report.contains("no landlock ("))
        }
    }
}
