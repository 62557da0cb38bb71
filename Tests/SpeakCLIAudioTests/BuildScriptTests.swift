import Foundation
import Testing

/// `scripts/swift-retry`, which the build, test, package and documentation steps go through: a
/// toolchain that dies of a signal (SwiftPM's and the documentation plugin's segfaults) is run
/// once more; an ordinary failure is not.
@Suite(.timeLimit(.minutes(1)))
struct BuildScriptTests {
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts")

    /// Runs `script` with a `swift` on the path that dies of `signal` on its first run (or exits
    /// `status` every time); its exit status and standard error.
    static func run(_ script: String, signal: Int32? = nil, status: Int32 = 0) throws -> (Int32, String, Int) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("swift-retry-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fake = directory.appendingPathComponent("swift")
        let marker = directory.appendingPathComponent("ran").path
        let first = signal.map { "if [ ! -e \(marker) ]; then touch \(marker); kill -\($0) $$; fi" }
        try """
        #!/bin/bash
        echo run >> \(directory.path)/runs
        \(first ?? "")
        exit \(status)
        """.write(to: fake, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fake.path)
        let process = Process()
        process.executableURL = Self.scripts.appendingPathComponent(script)
        process.arguments = ["package", "generate-documentation"]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = directory.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let runs = (try? String(contentsOf: directory.appendingPathComponent("runs"), encoding: .utf8)) ?? ""
        return (process.terminationStatus, stderr, runs.split(separator: "\n").count)
    }

    @Test(arguments: ["swift-retry", "swift-build"])
    func aToolchainThatDiesOfASignalRunsOnceMore(script: String) throws {
        let (status, stderr, runs) = try Self.run(script, signal: SIGSEGV)
        #expect(status == 0 && runs == 2, "\(stderr)")
        #expect(stderr.contains("died of signal 11; running it again"), "\(stderr)")
    }

    @Test func anOrdinaryFailureIsNotRetried() throws {
        let (status, stderr, runs) = try Self.run("swift-retry", status: 1)
        #expect(status == 1 && runs == 1, "\(stderr)")
        #expect(!stderr.contains("running it again"))
    }
}
