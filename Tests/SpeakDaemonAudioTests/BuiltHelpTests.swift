import Foundation
import SpeakDaemon
import SpeakTestSupport
import Testing

/// The built `speakd` program's help, against the settings `ConfigurationTests` checks in-process.
@Suite struct BuiltHelpTests {
    /// The built executable prints the same help, and exits 0.
    @Test(.timeLimit(.minutes(1))) func builtSpeakdHelpListsEverySetting() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-help-\(UUID().uuidString.prefix(8)).log"
        ).path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = try ChildProcess(
            try speakdExecutable(), ["--help"], environment: ProcessInfo.processInfo.environment, output: log)
        #expect(await process.wait(timeout: .seconds(30)) == 0)
        let help = try String(contentsOfFile: log, encoding: .utf8)
        for setting in DaemonConfiguration.settings {
            #expect(help.contains("  \(setting.flag)"), "\(setting.flag)")
        }
        #expect(help.contains("(default: 32)"))
    }
}
