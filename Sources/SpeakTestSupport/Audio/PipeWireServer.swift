import Foundation
import Synchronization

/// A private PipeWire instance for tests, reached the way desktops reach it: through
/// pipewire-pulse's PulseAudio socket, with null sinks whose monitors `MonitorRecorder` records.
///
/// Its own 0700 `XDG_RUNTIME_DIR`, config, state and home directories, and its own session bus
/// (`dbus-daemon --session`, which WirePlumber wants), then `pipewire`, `wireplumber` and
/// `pipewire-pulse`, each a child process ended by its PID. WirePlumber's device monitors (ALSA,
/// V4L2, libcamera, Bluetooth) are off, so the instance never opens a device of the machine.
/// Clients reach it with `environment` (`PULSE_SERVER`, `PULSE_CLIENTCONFIG`).
public final class PipeWireServer: Sendable {
    /// Holds the runtime, config, state and home directories and the logs.
    public let directory: URL
    /// The first null sink's name, set as the default sink; its monitor is `monitorSource`.
    public let sinkName: String
    /// Further null sinks, at the same rate and channels.
    public let extraSinks: [String]
    public let sampleRate: Int
    public let channels: Int
    /// Whether WirePlumber runs `contrib/wireplumber`'s ducking script.
    public let ducking: Bool
    /// The network namespace pipewire, wireplumber and pipewire-pulse run in; nil for the test's own.
    public let networkNamespace: String?
    /// dbus-daemon, then pipewire, wireplumber and pipewire-pulse; the last three are replaced by
    /// `restart()`.
    private let processes: Mutex<[ChildProcess]>

    /// `$XDG_RUNTIME_DIR`, where the PipeWire and PulseAudio sockets are.
    public var runtimeDirectory: URL { directory.appendingPathComponent("runtime") }
    /// `unix:$XDG_RUNTIME_DIR/pulse/native`, for `PULSE_SERVER` or `PulseAudioSink(server:)`.
    public var serverString: String { "unix:\(runtimeDirectory.path)/pulse/native" }
    /// The source that carries everything played on the first sink.
    public var monitorSource: String { "\(sinkName).monitor" }
    /// The source that carries everything played on the null sink `sink`.
    public func monitorSource(of sink: String) -> String { "\(sink).monitor" }

    /// The PIDs of pipewire, wireplumber and pipewire-pulse as they run now.
    public var serverPIDs: [pid_t] { processes.withLock { $0.dropFirst().map(\.pid) } }

    /// What a client process needs to talk to this instance's pipewire-pulse and nothing else.
    public var environment: [String: String] {
        [
            "PULSE_SERVER": serverString,
            "PULSE_CLIENTCONFIG": clientConfig.path,
            "PULSE_RUNTIME_PATH": directory.appendingPathComponent("client-runtime").path,
            "PULSE_STATE_PATH": directory.appendingPathComponent("client-state").path,
            "HOME": directory.appendingPathComponent("home").path,
        ]
    }

    /// A client environment: this process's, with `environment` laid over it.
    public var clientProcessEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(environment) { _, server in server }
    }

    /// What the server processes run with: only this instance's directories and bus.
    private var serverEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("PULSE_") && !key.hasPrefix("PIPEWIRE_") && !key.hasPrefix("WIREPLUMBER_")
                && !key.hasPrefix("XDG_") && key != "DBUS_SESSION_BUS_ADDRESS" && key != "DISPLAY"
        }
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory.path
        environment["XDG_CONFIG_HOME"] = directory.appendingPathComponent("config").path
        environment["XDG_STATE_HOME"] = directory.appendingPathComponent("state").path
        environment["HOME"] = directory.appendingPathComponent("home").path
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(runtimeDirectory.path)/bus"
        return environment
    }

    private var clientConfig: URL { directory.appendingPathComponent("client.conf") }

    /// Starts an instance with its null sinks and returns once WirePlumber has made the first
    /// sink the default (so streams are linked).
    /// - Parameters:
    ///   - sinkName: the first null sink's name, the default sink.
    ///   - extraSinks: the names of further null sinks, e.g. a second output's.
    ///   - sampleRate: the null sinks' rate; espeak-ng renders 22050 Hz.
    ///   - channels: the null sinks' channels.
    ///   - ducking: run `contrib/wireplumber/scripts/speakd-ducking.lua` in WirePlumber's policy.
    ///   - modules: PipeWire's `context.modules` entries to load as well (a `pipewire.conf.d`
    ///     file's text), e.g. `libpipewire-module-rtp-source`.
    ///   - networkNamespace: run the servers in this network namespace (`ip netns exec`, as root);
    ///     clients still reach them through their Unix sockets.
    ///   - timeout: how long to wait for each step.
    public static func start(
        sinkName: String = "speakd_test", extraSinks: [String] = [], sampleRate: Int = 22050, channels: Int = 1,
        ducking: Bool = false, modules: String? = nil, networkNamespace: String? = nil,
        timeout: Duration = .seconds(15)
    ) async throws -> PipeWireServer {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-pipewire-\(UUID().uuidString.prefix(8))")
        for name in ["runtime", "state", "home", "client-runtime", "client-state", "config/wireplumber"] {
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent(name), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        try writeConfiguration(in: directory, ducking: ducking, modules: modules)
        let server = PipeWireServer(
            directory: directory, sinkName: sinkName, extraSinks: extraSinks, sampleRate: sampleRate,
            channels: channels, ducking: ducking, networkNamespace: networkNamespace)
        do {
            let bus = try ChildProcess(
                "/usr/bin/dbus-daemon",
                ["--session", "--address=unix:path=\(server.runtimeDirectory.path)/bus", "--nofork", "--nopidfile"],
                environment: server.serverEnvironment, output: directory.appendingPathComponent("dbus.log").path)
            server.processes.withLock { $0 = [bus] }
            try await server.waitFor(file: "bus", of: bus, timeout: timeout)
            try await server.startServers(timeout: timeout)
        } catch {
            await server.stop()
            throw error
        }
        return server
    }

    private init(
        directory: URL, sinkName: String, extraSinks: [String], sampleRate: Int, channels: Int, ducking: Bool,
        networkNamespace: String?
    ) {
        self.directory = directory
        self.sinkName = sinkName
        self.extraSinks = extraSinks
        self.sampleRate = sampleRate
        self.channels = channels
        self.ducking = ducking
        self.networkNamespace = networkNamespace
        self.processes = Mutex([])
    }

    /// Starts pipewire, wireplumber and pipewire-pulse in that order, loads the null sinks and
    /// waits until WirePlumber has made the first one the default.
    private func startServers(timeout: Duration) async throws {
        let environment = serverEnvironment
        let pipewire = try ChildProcess(
            "/usr/bin/pipewire", [], environment: environment,
            output: directory.appendingPathComponent("pipewire.log").path, networkNamespace: networkNamespace)
        processes.withLock { $0.append(pipewire) }
        try await waitFor(file: "pipewire-0", of: pipewire, timeout: timeout)
        let wireplumber = try ChildProcess(
            "/usr/bin/wireplumber", [], environment: environment,
            output: directory.appendingPathComponent("wireplumber.log").path, networkNamespace: networkNamespace)
        processes.withLock { $0.append(wireplumber) }
        let pulse = try ChildProcess(
            "/usr/bin/pipewire-pulse", [], environment: environment,
            output: directory.appendingPathComponent("pipewire-pulse.log").path, networkNamespace: networkNamespace)
        processes.withLock { $0.append(pulse) }
        try await waitFor(file: "pulse/native", of: pulse, timeout: timeout)
        let deadline = ContinuousClock.now + timeout
        while await !answers() {
            if ContinuousClock.now > deadline {
                throw PulseAudioServer.Failure(description: "pipewire-pulse did not answer within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        for sink in [sinkName] + extraSinks { try await loadSink(sink) }
        // pipewire-pulse may answer the load before the sink is a node it can name (seen once with
        // the servers in a network namespace): ask again until it is.
        while try await run("/usr/bin/pactl", ["set-default-sink", sinkName]) != 0 {
            if ContinuousClock.now > deadline {
                throw PulseAudioServer.Failure(description: "pactl set-default-sink \(sinkName) failed")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // WirePlumber answers the configured default with the default it links streams to: once
        // that is the sink, it runs.
        while try await output("/usr/bin/pactl", ["get-default-sink"]).trimmingCharacters(in: .whitespacesAndNewlines)
            != sinkName
        {
            if let status = wireplumber.exitStatus {
                throw PulseAudioServer.Failure(description: "wireplumber exited with status \(status): \(log)")
            }
            if ContinuousClock.now > deadline {
                throw PulseAudioServer.Failure(description: "WirePlumber did not take up \(sinkName) within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits until `name` exists in the runtime directory, failing if `process` exits first.
    private func waitFor(file name: String, of process: ChildProcess, timeout: Duration) async throws {
        let path = runtimeDirectory.appendingPathComponent(name).path
        let deadline = ContinuousClock.now + timeout
        while !FileManager.default.fileExists(atPath: path) {
            if let status = process.exitStatus {
                throw PulseAudioServer.Failure(
                    description: "\(process.executable) exited with status \(status): \(log)")
            }
            if ContinuousClock.now > deadline {
                throw PulseAudioServer.Failure(description: "\(process.executable) made no \(path) within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Loads a null sink `name` at the instance's rate and channels (`pactl load-module module-null-sink`).
    public func loadSink(_ name: String) async throws {
        let arguments = [
            "load-module", "module-null-sink", "sink_name=\(name)", "rate=\(sampleRate)", "channels=\(channels)",
        ]
        guard try await run("/usr/bin/pactl", arguments) == 0 else {
            throw PulseAudioServer.Failure(description: "pactl load-module module-null-sink sink_name=\(name) failed")
        }
    }

    /// Kills pipewire, wireplumber and pipewire-pulse at once by their PIDs (SIGKILL), as a crash
    /// would, waits until they have gone, and starts them again in order on the same sockets, with
    /// the same null sinks; returns once the new instance links streams.
    public func restart(timeout: Duration = .seconds(15)) async throws {
        let servers = processes.withLock { $0.dropFirst() }
        for process in servers { process.send(SIGKILL) }
        for process in servers { _ = await process.wait(timeout: .seconds(10)) }
        processes.withLock { $0.removeLast($0.count - 1) }
        // A killed server leaves its sockets and lock files; the new one must not find them.
        for name in ["pipewire-0", "pipewire-0.lock", "pulse"] {
            try? FileManager.default.removeItem(at: runtimeDirectory.appendingPathComponent(name))
        }
        try await startServers(timeout: timeout)
    }

    /// Ends every process by its PID, the servers before their bus (SIGTERM, then SIGKILL after a
    /// second), and removes the directory.
    public func stop() async {
        for process in processes.withLock({ $0 }).reversed() { await process.terminate() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The servers' logs, for failure messages.
    public var log: String {
        ["pipewire", "wireplumber", "pipewire-pulse"].map { name in
            let text = (try? String(contentsOf: directory.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
            return "\(name):\n\(text.suffix(2000))"
        }.joined(separator: "\n")
    }

    // MARK: Configuration

    /// The repository's `contrib/wireplumber`: the ducking script and the policy file that loads it.
    static let contribDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("contrib/wireplumber")

    /// Writes the client configuration and WirePlumber's: no device monitors, and the ducking
    /// script when `ducking`; and `modules` as a `pipewire.conf.d` file.
    private static func writeConfiguration(in directory: URL, ducking: Bool, modules: String?) throws {
        // No autospawn, no shared memory (which fails in containers).
        try Data("autospawn = no\nenable-shm = no\nenable-memfd = no\n".utf8)
            .write(to: directory.appendingPathComponent("client.conf"))
        let wireplumber = directory.appendingPathComponent("config/wireplumber")
        let files = [
            "main.lua.d/60-private.lua":
                "alsa_monitor.enabled = false\nv4l2_monitor.enabled = false\nlibcamera_monitor.enabled = false\n",
            "bluetooth.lua.d/60-private.lua": "bluez_monitor.enabled = false\n",
        ]
        for (path, text) in files {
            let url = wireplumber.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        if let modules {
            let url = directory.appendingPathComponent("config/pipewire/pipewire.conf.d/60-modules.conf")
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("context.modules = [\n\(modules)\n]\n".utf8).write(to: url)
        }
        if ducking {
            for path in ["scripts/speakd-ducking.lua", "policy.lua.d/60-speakd-ducking.lua"] {
                let url = wireplumber.appendingPathComponent(path)
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: contribDirectory.appendingPathComponent(path), to: url)
            }
        }
    }
}
