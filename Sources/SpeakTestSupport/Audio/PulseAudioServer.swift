import Foundation

/// A private PulseAudio server for tests: one null sink (more on request), a Unix socket in its own directory, and
/// its own runtime, state and home directories, so tests never touch another server.
///
/// Started in the foreground of its own process group (not system mode, which root would otherwise
/// need) with exactly the modules a test needs. Clients reach it with `environment`
/// (`PULSE_SERVER`, `PULSE_CLIENTCONFIG`); what is played can be recorded from
/// `monitorSource` with `MonitorRecorder`. Every signal goes to the server's PID.
public final class PulseAudioServer: Sendable {
    /// The directory holding the socket, runtime, state and home directories and the log.
    public let directory: URL
    /// The null sink's name; its monitor is `monitorSource`.
    public let sinkName: String
    /// Further null sinks, at the same rate and channels; each one's monitor is `monitorSource(of:)`.
    public let extraSinks: [String]
    public let sampleRate: Int
    public let channels: Int
    /// The server process's PID.
    public var pid: pid_t { process.pid }
    private let process: ChildProcess

    /// `unix:DIR/native`, for `PULSE_SERVER` or `PulseAudioSink(server:)`.
    public var serverString: String { "unix:\(directory.path)/native" }
    /// The source that carries everything played on the sink.
    public var monitorSource: String { "\(sinkName).monitor" }

    /// The source that carries everything played on the null sink `sink`.
    public func monitorSource(of sink: String) -> String { "\(sink).monitor" }
    /// The client configuration: no autospawn, no shared memory (which fails in containers).
    public var clientConfigPath: String { Self.clientConfig.path }

    /// What a client process needs to talk to this server and only this server.
    public var environment: [String: String] {
        [
            "PULSE_SERVER": serverString,
            "PULSE_CLIENTCONFIG": clientConfigPath,
            "PULSE_RUNTIME_PATH": directory.appendingPathComponent("runtime").path,
            "PULSE_STATE_PATH": directory.appendingPathComponent("state").path,
            "HOME": directory.appendingPathComponent("home").path,
        ]
    }

    /// A client environment: this process's, with `environment` laid over it.
    public var clientProcessEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(environment) { _, server in server }
    }

    /// What went wrong starting or talking to the server.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts a server and returns once its socket answers.
    /// - Parameters:
    ///   - sinkName: the null sink's name.
    ///   - extraSinks: the names of further null sinks, e.g. a second output's.
    ///   - sampleRate: the null sink's rate; espeak-ng renders 22050 Hz.
    ///   - channels: the null sink's channels.
    ///   - timeout: how long to wait for the socket to answer.
    ///   - directory: where to put the socket and state; a new temporary directory when nil.
    ///     Pass a stopped server's `directory` to restart it on the same socket.
    public static func start(
        sinkName: String = "speakd_test", extraSinks: [String] = [], sampleRate: Int = 22050, channels: Int = 1,
        timeout: Duration = .seconds(15), directory: URL? = nil
    ) async throws -> PulseAudioServer {
        useClientConfigInThisProcess()
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-pulse-\(UUID().uuidString.prefix(8))")
        for name in ["runtime", "state", "home"] {
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent(name), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        let socket = directory.appendingPathComponent("native").path
        var environment = ProcessInfo.processInfo.environment
        environment["PULSE_SERVER"] = nil
        environment["PULSE_RUNTIME_PATH"] = directory.appendingPathComponent("runtime").path
        environment["PULSE_STATE_PATH"] = directory.appendingPathComponent("state").path
        environment["HOME"] = directory.appendingPathComponent("home").path
        environment["PULSE_CLIENTCONFIG"] = clientConfig.path
        let log = directory.appendingPathComponent("pulseaudio.log")
        let process = try ChildProcess(
            "/usr/bin/pulseaudio",
            [
                "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=no",
                "--log-target=stderr",
                "-L", "module-native-protocol-unix socket=\(socket) auth-anonymous=1",
                "-L", "module-null-sink sink_name=\(sinkName) rate=\(sampleRate) channels=\(channels)",
                "-L", "module-always-sink",
            ]
                + extraSinks.flatMap { sink in
                    ["-L", "module-null-sink sink_name=\(sink) rate=\(sampleRate) channels=\(channels)"]
                },
            environment: environment, output: log.path)

        let server = PulseAudioServer(
            directory: directory, sinkName: sinkName, extraSinks: extraSinks, sampleRate: sampleRate,
            channels: channels,
            process: process)
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = process.exitStatus {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw Failure(description: "pulseaudio exited with status \(status): \(text)")
            }
            if FileManager.default.fileExists(atPath: socket), await server.answers() { return server }
            if ContinuousClock.now > deadline {
                await server.stop()
                throw Failure(description: "pulseaudio did not answer on \(socket) within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    private init(
        directory: URL, sinkName: String, extraSinks: [String], sampleRate: Int, channels: Int,
        process: ChildProcess
    ) {
        self.directory = directory
        self.sinkName = sinkName
        self.extraSinks = extraSinks
        self.sampleRate = sampleRate
        self.channels = channels
        self.process = process
    }

    /// Unloads the null sink `name` (`pactl unload-module`), as when a headset is unplugged:
    /// the server ends or moves the streams playing on it.
    public func unloadSink(_ name: String) async throws {
        let listing = directory.appendingPathComponent("modules.txt")
        let lister = try ChildProcess(
            "/usr/bin/pactl", ["list", "short", "modules"], environment: clientProcessEnvironment, output: listing.path)
        guard await lister.wait(timeout: .seconds(5)) == 0 else {
            throw Failure(description: "pactl list short modules failed")
        }
        let modules = (try? String(contentsOf: listing, encoding: .utf8)) ?? ""
        // "3<TAB>module-null-sink<TAB>sink_name=headset rate=22050 channels=1"
        guard
            let line = modules.split(separator: "\n").first(where: { line in
                let fields = line.split(separator: "\t")
                return fields.count >= 3 && fields[1] == "module-null-sink"
                    && fields[2].split(separator: " ").contains("sink_name=\(name)")
            }),
            let index = line.split(separator: "\t").first
        else { throw Failure(description: "no null sink \(name) is loaded:\n\(modules)") }
        guard try await run("/usr/bin/pactl", ["unload-module", String(index)]) == 0 else {
            throw Failure(description: "pactl unload-module \(index) failed")
        }
    }

    /// Loads a null sink `name` at the server's rate and channels, as when a headset is plugged in.
    public func loadSink(_ name: String) async throws {
        let arguments = [
            "load-module", "module-null-sink", "sink_name=\(name)", "rate=\(sampleRate)", "channels=\(channels)",
        ]
        guard try await run("/usr/bin/pactl", arguments) == 0 else {
            throw Failure(description: "pactl load-module module-null-sink sink_name=\(name) failed")
        }
    }

    /// Freezes the server (SIGSTOP): clients block as on a wedged device.
    public func suspend() {
        process.send(SIGSTOP)
    }

    /// Lets a suspended server run again (SIGCONT).
    public func resume() {
        process.send(SIGCONT)
    }

    /// Ends the server at once by its PID (SIGKILL), as a crash would, and waits until it has
    /// gone; the directory is kept, to restart on the same socket.
    public func kill() async {
        process.send(SIGKILL)
        _ = await process.wait(timeout: .seconds(10))
    }

    /// Ends the server by its PID (SIGTERM, then SIGKILL after a second) and removes its
    /// directory unless `keepDirectory` (to restart on the same socket).
    public func stop(keepDirectory: Bool = false) async {
        await process.terminate()
        if !keepDirectory { try? FileManager.default.removeItem(at: directory) }
    }

    // MARK: The client configuration

    /// One client configuration for the whole test process. libpulse reads `PULSE_CLIENTCONFIG`
    /// from the environment when a client connects, so in-process sinks need it set; setting it
    /// once, before any client runs, avoids changing the environment while libpulse reads it.
    private static let clientConfig: URL = {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-pulse-client-\(getpid()).conf")
        let text = "autospawn = no\nenable-shm = no\nenable-memfd = no\n"
        _ = FileManager.default.createFile(atPath: url.path, contents: Data(text.utf8))
        setenv("PULSE_CLIENTCONFIG", url.path, 1)
        // Removed when the test process exits, so runs do not pile these up in /tmp.
        atexit {
            unlink(
                FileManager.default.temporaryDirectory.appendingPathComponent("speakd-pulse-client-\(getpid()).conf")
                    .path)
        }
        return url
    }()

    /// Points this process's PulseAudio clients at the test client configuration (no autospawn,
    /// no shared memory). Called by `start`; idempotent.
    public static func useClientConfigInThisProcess() {
        _ = clientConfig
    }
}
