import Foundation

/// The package's executables (`speak`, `speakd`), run as a user would run them.
public enum BuiltProduct {
    /// What a finished run printed and how it exited.
    public struct Result: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The built executable `name`, beside the test bundle in the build directory.
    public static func path(_ name: String) -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        // `swift test` runs `<build>/<package>PackageTests.xctest`; on macOS it is a bundle folder.
        while directory.pathExtension == "xctest" || ["MacOS", "Contents"].contains(directory.lastPathComponent) {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent(name).path
    }

    /// Starts `name` with `arguments`, in this process's environment with `environment` laid over it.
    public static func start(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], standardInput: Data? = nil
    ) throws -> RunningProduct {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-run-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let input = directory.appendingPathComponent("stdin")
        try (standardInput ?? Data()).write(to: input)
        let output = directory.appendingPathComponent("stdout")
        let error = directory.appendingPathComponent("stderr")
        let child = try ChildProcess(
            path(name), arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            output: output.path, errorOutput: error.path, input: input.path)
        return RunningProduct(child: child, directory: directory)
    }

    /// Runs `name` to the end; it is killed after `timeout`.
    public static func run(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], standardInput: Data? = nil,
        timeout: Duration = .seconds(60)
    ) async throws -> Result {
        try await start(name, arguments, environment: environment, standardInput: standardInput)
            .wait(timeout: timeout)
    }
}

/// A started executable, its standard output and error collected in files.
public final class RunningProduct: Sendable {
    public let child: ChildProcess
    private let directory: URL

    init(child: ChildProcess, directory: URL) {
        self.child = child
        self.directory = directory
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    public var pid: pid_t { child.pid }

    /// What it has written to standard output so far.
    public var standardOutputSoFar: String { read("stdout") }

    /// What it has written to standard error so far.
    public var standardErrorSoFar: String { read("stderr") }

    /// Sends `signal` to it (by PID).
    public func signal(_ signal: Int32) {
        child.send(signal)
    }

    /// Waits for it to exit; after `timeout` it is killed and this throws.
    public func wait(timeout: Duration = .seconds(60)) async throws -> BuiltProduct.Result {
        guard let status = await child.wait(timeout: timeout) else {
            await child.terminate()
            throw BuiltProduct.Failure(
                description: "\(child.executable) did not exit within \(timeout); stderr: \(standardErrorSoFar)")
        }
        return BuiltProduct.Result(
            status: status, standardOutput: standardOutputSoFar, standardError: standardErrorSoFar)
    }

    private func read(_ name: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
    }
}
