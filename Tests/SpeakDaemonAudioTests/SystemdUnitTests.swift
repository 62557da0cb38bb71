import Foundation
import SpeakTestSupport
import Testing

/// The unit files, sysusers and tmpfiles snippets pass systemd's own checks (systemd/verify.sh).
@Suite("systemd units")
struct SystemdUnitTests {
    static let systemdDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("systemd")

    @Test(
        .timeLimit(.minutes(1)),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze"))
    func verifyPasses() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-verify-\(UUID().uuidString.prefix(8)).log"
        ).path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = try ChildProcess(
            "/bin/sh", [Self.systemdDirectory.appendingPathComponent("verify.sh").path, try speakdExecutable()],
            environment: ProcessInfo.processInfo.environment, output: log)
        let status = await process.wait(timeout: .seconds(50))
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(output)")
        #expect(output.components(separatedBy: "\nok   ").count + (output.hasPrefix("ok   ") ? 1 : 0) >= 5, "\(output)")
        #expect(!output.contains("FAIL"), "\(output)")
    }

    /// The sandbox lines that matter for a kiosk daemon are present in the system unit.
    @Test func systemUnitIsSandboxed() throws {
        let unit = try String(
            contentsOf: Self.systemdDirectory.appendingPathComponent("speakd.service"), encoding: .utf8)
        for line in [
            "Type=notify", "User=speakd", "RuntimeDirectory=speakd", "SupplementaryGroups=audio",
            "ProtectSystem=strict",
            "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        ] {
            #expect(unit.contains("\n\(line)\n"), "\(line)")
        }
        let user = try String(
            contentsOf: Self.systemdDirectory.appendingPathComponent("user/speakd.service"), encoding: .utf8)
        #expect(user.contains("\nType=notify\n"))
        #expect(user.contains("--audio pulse"))
    }
}
