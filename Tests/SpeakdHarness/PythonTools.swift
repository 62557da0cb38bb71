import Foundation
import SpeakTestSupport
import Testing

/// The Python tools some suites drive (schemathesis, selenium), from the environment
/// `scripts/install-deps --test` makes in `.build-python/`, and the repository they check.
package enum PythonTools {
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    package static let bin = root.appendingPathComponent(".build-python/bin")

    /// Runs `executable` from the environment (`schemathesis`, `python3`); its exit status (nil
    /// when it was stopped at `timeout`) and everything it printed.
    package static func run(_ executable: String, _ arguments: [String], timeout: Duration) async throws -> (
        status: Int32?, output: String
    ) {
        let path = bin.appendingPathComponent(executable).path
        try #require(
            FileManager.default.isExecutableFile(atPath: path), "\(path) is missing: run scripts/install-deps --test")
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-python-\(UUID()).log")
        defer { try? FileManager.default.removeItem(at: log) }
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment["PYTHONUNBUFFERED"] = "1"
        let process = try ChildProcess(path, arguments, environment: environment, output: log.path)
        let status = await process.wait(timeout: timeout)
        if status == nil { await process.terminate() }
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    /// A script of the repository's `scripts/`, run with the environment's Python.
    package static func script(_ name: String, _ arguments: [String], timeout: Duration) async throws -> (
        status: Int32?, output: String
    ) {
        try await run("python3", [root.appendingPathComponent("scripts/\(name)").path] + arguments, timeout: timeout)
    }
}
