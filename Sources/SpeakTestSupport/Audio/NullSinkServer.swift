import Foundation

/// A private sound server with null sinks whose monitors `MonitorRecorder` records: PulseAudio
/// itself (`PulseAudioServer`) or PipeWire through pipewire-pulse (`PipeWireServer`).
public protocol NullSinkServer: Sendable {
    /// Where the recorder may put its capture files.
    var directory: URL { get }
    var sampleRate: Int { get }
    var channels: Int { get }
    /// The monitor of the first null sink.
    var monitorSource: String { get }
    /// The monitor of the null sink `sink`.
    func monitorSource(of sink: String) -> String
    /// The environment of a client process that talks to this server only.
    var clientProcessEnvironment: [String: String] { get }
}

extension NullSinkServer {
    /// True when `pactl info` gets an answer from the server.
    public func answers() async -> Bool {
        (try? await run("/usr/bin/pactl", ["info"], timeout: .seconds(2))) == 0
    }

    /// Runs a PulseAudio client program against this server and returns its exit status, or
    /// nil when it did not finish within `timeout` (it is killed). Output goes to `client.log`
    /// in the server's directory.
    public func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(10)) async throws
        -> Int32?
    {
        let process = try ChildProcess(
            executable, arguments, environment: clientProcessEnvironment,
            output: directory.appendingPathComponent("client.log").path)
        if let status = await process.wait(timeout: timeout) { return status }
        await process.terminate(grace: .zero)
        return nil
    }

    /// Runs a PulseAudio client program against this server and returns what it printed.
    public func output(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(10)) async throws
        -> String
    {
        let file = directory.appendingPathComponent("output-\(UUID().uuidString.prefix(8)).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        let process = try ChildProcess(
            executable, arguments, environment: clientProcessEnvironment, output: file.path)
        if await process.wait(timeout: timeout) == nil { await process.terminate(grace: .zero) }
        return (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    }
}

extension PulseAudioServer: NullSinkServer {}
extension PipeWireServer: NullSinkServer {}
