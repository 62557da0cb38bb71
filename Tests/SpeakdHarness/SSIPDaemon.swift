import Foundation
import SpeakAPI
import SpeakTestSupport
import Testing

/// speakd with an SSIP socket, its audio server and recorder.
package struct SSIPDaemon {
    package let speakd: AudibleDaemon
    package let path: String
    package let directory: URL

    package static func start() async throws -> SSIPDaemon {
        let directory = URL(fileURLWithPath: "/tmp/speakd-ssip-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("speechd.sock").path
        let speakd = try await AudibleDaemon.start(arguments: ["--ssip", path])
        let deadline = ContinuousClock.now + .seconds(10)
        while !FileManager.default.fileExists(atPath: path), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try #require(FileManager.default.fileExists(atPath: path), "no SSIP socket; log:\n\(speakd.daemon.log)")
        return SSIPDaemon(speakd: speakd, path: path, directory: directory)
    }

    /// What a speech-dispatcher client needs to find speakd, and nothing to spawn.
    package var clientEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["SPEECHD_ADDRESS"] = "unix_socket:\(path)"
        environment["SPEECHD_CMD"] = "/bin/false"
        return environment
    }

    /// Runs a client to its end; its exit status (nil when stopped at `timeout`), output and end.
    package func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(20)) async throws
        -> (status: Int32?, output: String, exited: ContinuousClock.Instant)
    {
        let log = directory.appendingPathComponent("client-\(UUID().uuidString.prefix(6)).log")
        let process = try ChildProcess(executable, arguments, environment: clientEnvironment, output: log.path)
        let status = await process.wait(timeout: timeout)
        let exited = ContinuousClock.now
        if status == nil { await process.terminate() }
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "", exited)
    }

    package func stop() async -> Recording {
        let recording = await speakd.stop()
        try? FileManager.default.removeItem(at: directory)
        return recording
    }

    /// Says `text` with spd-say (which closes right after 225, so the message outlives its
    /// connection), lets it be heard for `listening` after its first word, runs
    /// `whileSpeaking`, cancels everything with `spd-say -C`, and stops once the
    /// `finished` event has come and half a second more was recorded.
    /// - Returns: when `spd-say -C` exited, the finished events, and the recording.
    package func sayThenCancel(
        _ text: String, listening: Duration, whileSpeaking: () throws -> Void = {}
    ) async throws -> (cancelled: ContinuousClock.Instant, finished: [AnnouncementEvent], recording: Recording) {
        let said = try await run("/usr/bin/spd-say", [text])
        #expect(said.status == 0, "spd-say: \(said.output)")
        let started = await speakd.events.wait(timeout: .seconds(10)) { events in
            events.contains { $0.type == .word }
        }
        #expect(started, "the message was never heard")
        try await Task.sleep(for: listening)
        try whileSpeaking()
        let cancel = try await run("/usr/bin/spd-say", ["-C"])
        #expect(cancel.status == 0, "spd-say -C: \(cancel.output)")
        let cancelled = await speakd.events.wait(timeout: .seconds(5)) { events in
            events.contains { $0.type == .finished }
        }
        #expect(cancelled)
        try await Task.sleep(for: .milliseconds(500))
        let finished = speakd.events.events.filter { $0.type == .finished }
        return (cancel.exited, finished, await stop())
    }
}
