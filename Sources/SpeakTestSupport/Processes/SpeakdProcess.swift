import Foundation
import SpeakAPI
import SpeakClient

/// The real `speakd` executable, started for a test on a private Unix socket and a free loopback
/// port, and stopped by its PID.
///
/// `start` returns once `/healthz` answers on both listeners. The daemon's standard error (its
/// log) is kept in `directory` so a failing test can show it.
public final class SpeakdProcess: Sendable {
    /// Holds the socket, the runtime directory and the log.
    public let directory: URL
    /// The Unix socket the daemon listens on.
    public let socketPath: String
    /// The loopback TCP port the daemon listens on.
    public let port: Int
    /// The daemon's PID.
    public var pid: pid_t { process.pid }
    private let process: ChildProcess
    /// False when the daemon runs in another network namespace, where its loopback is its own.
    private let tcpReachable: Bool

    /// What went wrong starting or stopping the daemon.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// speakd exited before it answered `/healthz`: its exit status (128 + signal when a signal
    /// ended it) and everything it logged. `start` throws it, so a test that expects a start to
    /// be refused can read why (`startRefused`).
    public struct ExitedWhileStarting: Error, CustomStringConvertible {
        public let status: Int32
        public let log: String

        public var description: String { "speakd exited with status \(status) while starting:\n\(log)" }
    }

    /// A client for the Unix socket.
    public var unixClient: SpeakHTTPClient {
        SpeakHTTPClient(endpoint: .unixSocket(path: socketPath), timeout: .seconds(20))
    }

    /// Where the daemon keeps its TCP token: `token` next to its socket, unless the test gave
    /// `--token-file`.
    public var tokenFile: String {
        directory.appendingPathComponent(AccessToken.fileName).path
    }

    /// The daemon's TCP token, as a client in the socket's group reads it; nil when there is
    /// none (`--tcp-open`).
    public var token: String? {
        try? AccessToken.read(from: tokenFile)
    }

    /// A client for the TCP listener, with the daemon's token.
    public var tcpClient: SpeakHTTPClient {
        SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: port), timeout: .seconds(20), token: token)
    }

    /// Everything the daemon has logged so far.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("speakd.log"), encoding: .utf8)) ?? ""
    }

    /// Starts `speakd` and waits until both listeners answer `/healthz` with 200.
    /// - Parameters:
    ///   - executable: the `speakd` binary; nil for the one built beside this process.
    ///   - audio: the `--audio` value (`null`, `pulse`, `wav:PATH`, …).
    ///   - arguments: further flags (`--max-queue 2`, …).
    ///   - environment: laid over this process's environment (a `PulseAudioServer.environment`);
    ///     `NOTIFY_SOCKET` and `PULSE_SERVER` are taken out unless given here.
    ///   - timeout: how long to wait for the daemon to become healthy.
    ///   - networkNamespace: runs the daemon in this network namespace (`ip netns exec`, as root);
    ///     its TCP listener is then out of reach, so only the Unix socket is waited for.
    public static func start(
        executable: String? = nil, audio: String, arguments: [String] = [], environment: [String: String] = [:],
        timeout: Duration = .seconds(30), networkNamespace: String? = nil
    ) async throws -> SpeakdProcess {
        let executable = executable ?? BuiltProduct.path("speakd")
        // Another process can take the free port between the probe and the daemon's bind; try again then.
        var lastFailure: (any Error)?
        for _ in 0..<3 {
            let directory = URL(fileURLWithPath: "/tmp", isDirectory: true)
                .appendingPathComponent("speakd-it-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("runtime"), withIntermediateDirectories: true)
            let socketPath = directory.appendingPathComponent("speakd.sock").path
            let port = try freeLoopbackPort()
            var childEnvironment = ProcessInfo.processInfo.environment
            childEnvironment["NOTIFY_SOCKET"] = nil
            childEnvironment["PULSE_SERVER"] = nil
            childEnvironment["RUNTIME_DIRECTORY"] = directory.appendingPathComponent("runtime").path
            childEnvironment.merge(environment) { $1 }
            let daemonArguments =
                ["--socket", socketPath, "--http", "127.0.0.1:\(port)", "--audio", audio, "--log-level", "info"]
                + arguments
            let process = try ChildProcess(
                executable, daemonArguments, environment: childEnvironment,
                output: directory.appendingPathComponent("speakd.log").path, networkNamespace: networkNamespace)
            let daemon = SpeakdProcess(
                directory: directory, socketPath: socketPath, port: port, process: process,
                tcpReachable: networkNamespace == nil)
            do {
                try await daemon.waitUntilHealthy(timeout: timeout)
                return daemon
            } catch {
                lastFailure = error
                await process.terminate()
                let log = daemon.log
                try? FileManager.default.removeItem(at: directory)
                guard log.contains("Address already in use") || log.contains("EADDRINUSE") else { throw error }
            }
        }
        throw lastFailure ?? Failure(description: "speakd did not start")
    }

    /// Starts `speakd` as `start` does, for a start that must be refused: returns its exit status
    /// and log once it has exited. A daemon that becomes healthy instead is stopped, and
    /// `Failure` thrown saying so.
    public static func startRefused(
        executable: String? = nil, audio: String, arguments: [String] = [], environment: [String: String] = [:],
        timeout: Duration = .seconds(30)
    ) async throws -> ExitedWhileStarting {
        let daemon: SpeakdProcess
        do {
            daemon = try await start(
                executable: executable, audio: audio, arguments: arguments, environment: environment,
                timeout: timeout)
        } catch let exited as ExitedWhileStarting {
            return exited
        }
        let log = daemon.log
        await daemon.stop()
        throw Failure(description: "speakd started, though its start should have been refused:\n\(log)")
    }

    private init(directory: URL, socketPath: String, port: Int, process: ChildProcess, tcpReachable: Bool = true) {
        self.tcpReachable = tcpReachable
        self.directory = directory
        self.socketPath = socketPath
        self.port = port
        self.process = process
    }

    deinit {
        // A test that failed before stopping the daemon must not leave it running.
        if process.isRunning {
            process.send(SIGKILL)
            _ = process.exitStatus
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// True until the daemon has exited.
    public var isRunning: Bool { process.isRunning }

    /// The exit status once the daemon has exited.
    public var exitStatus: Int32? { process.exitStatus }

    private func waitUntilHealthy(timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        var lastProblem = "no answer"
        while ContinuousClock.now < deadline {
            if let status = process.exitStatus {
                throw ExitedWhileStarting(status: status, log: log)
            }
            let quick = [
                SpeakHTTPClient(endpoint: .unixSocket(path: socketPath), timeout: .seconds(2)),
                SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: port), timeout: .seconds(2)),
            ].prefix(tcpReachable ? 2 : 1)
            var healthy = 0
            for client in quick {
                do {
                    let response = try await client.send("GET", "/healthz")
                    if response.status == 200 {
                        healthy += 1
                    } else {
                        lastProblem =
                            "\(client.endpoint) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))"
                    }
                } catch {
                    lastProblem = "\(client.endpoint): \(error)"
                }
            }
            if healthy == quick.count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure(description: "speakd was not healthy within \(timeout) (\(lastProblem)):\n\(log)")
    }

    /// Sends `signal` (SIGTERM by default) to the daemon's PID and waits for it to exit.
    /// - Returns: the exit status (128 + signal when a signal ended it) and how long it took;
    ///   nil status when it had not exited within `timeout` (it is then killed).
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(10)) async -> (
        status: Int32?, took: Duration
    ) {
        let sent = ContinuousClock.now
        process.send(signal)
        let status = await process.wait(timeout: timeout)
        let took = ContinuousClock.now - sent
        if status == nil { await process.terminate(grace: .zero) }
        return (status, took)
    }

    /// Renders a JSON announcement body with `POST /v1/speech` over the Unix socket and reads
    /// the WAV file it answers, checked by `WAVReader`: as the hall would hear it, or with `raw`
    /// the engine's own audio.
    public func speech(json body: Data, raw: Bool = false) async throws -> WAVReader {
        let response = try await unixClient.send(
            "POST", raw ? "/v1/speech?raw=true" : "/v1/speech", headers: [("Content-Type", "application/json")],
            body: Array(body))
        guard response.status == 200 else {
            throw Failure(description: "/v1/speech answered \(response.status)")
        }
        let file = directory.appendingPathComponent("speech-\(UUID().uuidString.prefix(8)).wav")
        try Data(response.body).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try WAVReader(contentsOf: file)
    }

    /// The value of `speakd_event_streams` on `/metrics`: how many event streams are open.
    public func openEventStreams() async throws -> Int {
        let response = try await unixClient.send("GET", "/metrics")
        let text = String(decoding: response.body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("speakd_event_streams ") {
            if let value = Double(line.split(separator: " ").last ?? "") { return Int(value) }
        }
        throw Failure(description: "no speakd_event_streams gauge on /metrics:\n\(text)")
    }

    /// Waits until at least `count` event streams are open, so events posted next reach them live.
    public func waitForEventStreams(_ count: Int, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await openEventStreams() < count {
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "fewer than \(count) event streams open after \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// A loopback TCP port that nothing listens on now (bound to port 0, read back, closed).
    public static func freeLoopbackPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket(): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure(description: "bind(): \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else { throw Failure(description: "getsockname(): \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
