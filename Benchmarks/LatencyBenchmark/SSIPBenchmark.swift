import Foundation
import SpeakTestSupport

/// `speakd-latency-bench --ssip [--runs N]`: `spd-say -w` through speakd's SSIP front against a
/// real speech-dispatcher with its espeak-ng module, both playing on one private null sink.
///
/// speech-dispatcher runs as a private server (`-s -t 0 -c unix_socket -S PATH`, the system's
/// configuration: its default espeak-ng module and PulseAudio output, reached through this
/// PulseAudio's `PULSE_SERVER`); speakd runs as built with `--ssip PATH`. Debian's `spd-say -w`
/// speaks the same sentence through each in turn (A B A B …, so drift and load spread evenly
/// over both), after one warm-up each, and every run is timed from the recording:
///
/// - `spd-say` spawned → the first audible sample, when its block reached the recorder;
/// - the last audible sample, when its block reached the recorder → `spd-say -w` exited (on
///   `702 END`).
///
/// Both read the recorder's arrival times, late by the same small delivery delay, so the
/// comparison holds whatever that delay is. The goal (DESIGN): at least as fast as the peer on
/// both; the medians are compared.
struct SSIPBenchmark {
    static let text = "The next train to Porto leaves from platform two."
    /// Silence between runs: both servers' streams go idle, and the recording segments cleanly.
    static let pause = Duration.milliseconds(1_200)
    /// What sounds, as the integration tests' recordings take it.
    static let silenceLevel = 0.005

    struct Server {
        let name: String
        let socket: String
        var first: [Double] = []
        var last: [Double] = []
    }

    static func run(speakdPath: String, runs: Int) async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/speech-dispatcher"),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/spd-say")
        else {
            exitSaying("--ssip needs Debian's speech-dispatcher (spd-say and the server): scripts/install-deps --bench")
        }
        let directory = try scratchDirectory("speakd-ssip-bench")
        defer { try? FileManager.default.removeItem(at: directory) }
        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        let speakdSocket = directory.appendingPathComponent("speakd-ssip.sock").path
        let peerSocket = directory.appendingPathComponent("speech-dispatcher.sock").path
        let daemon = try await SpeakdProcess.start(
            executable: speakdPath, audio: "pulse", arguments: ["--ssip", speakdSocket, "--render-cache-mib", "0"],
            environment: pulse.environment)
        let peer = try ChildProcess(
            "/usr/bin/speech-dispatcher", ["-s", "-t", "0", "-c", "unix_socket", "-S", peerSocket, "-l", "1"],
            environment: pulse.clientProcessEnvironment,
            output: directory.appendingPathComponent("speech-dispatcher.log").path)
        var servers = [
            Server(name: "speakd", socket: speakdSocket), Server(name: "speech-dispatcher", socket: peerSocket),
        ]
        do {
            let deadline = ContinuousClock.now + .seconds(10)
            while !FileManager.default.fileExists(atPath: peerSocket), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            for round in 0...runs {
                for index in servers.indices {
                    let timing = try await speak(through: servers[index], recorder: recorder, pulse: pulse)
                    // Round 0 warms both up (the peer starts its module, speakd its worker).
                    guard round > 0 else { continue }
                    servers[index].first.append(timing.first)
                    servers[index].last.append(timing.last)
                }
            }
        } catch {
            peer.send(SIGTERM)
            _ = await peer.wait(timeout: .seconds(5))
            _ = await daemon.stop()
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
        peer.send(SIGTERM)
        _ = await peer.wait(timeout: .seconds(5))
        _ = await daemon.stop()
        _ = await recorder.stop()
        await pulse.stop()
        report(servers, runs: runs)
    }

    /// One `spd-say -w` through `server`, timed from the recording.
    static func speak(
        through server: Server, recorder: MonitorRecorder, pulse: PulseAudioServer
    ) async throws -> (first: Double, last: Double) {
        var environment = pulse.clientProcessEnvironment
        environment["SPEECHD_ADDRESS"] = "unix_socket:\(server.socket)"
        environment["SPEECHD_CMD"] = "/bin/false"
        let fromFrame = recorder.recordedFrames
        let spawned = ContinuousClock.now
        let client = try ChildProcess("/usr/bin/spd-say", ["-w", text], environment: environment)
        guard await client.wait(timeout: .seconds(20)) == 0 else {
            await client.terminate()
            throw SpeakdProcess.Failure(description: "spd-say -w through \(server.name) failed or timed out")
        }
        let exited = ContinuousClock.now
        try await Task.sleep(for: pause)
        let samples = Array(recorder.samplesSoFar().dropFirst(fromFrame * recorder.channels))
        let mono =
            recorder.channels == 1
            ? samples : stride(from: 0, to: samples.count, by: recorder.channels).map { samples[$0] }
        let segments = AudioAnalysis(samples: mono, sampleRate: recorder.sampleRate)
            .soundingSegments(minimumSilence: 0.6, silenceLevel: silenceLevel)
        guard segments.count == 1, let segment = segments.first else {
            throw SpeakdProcess.Failure(description: "\(server.name): heard \(segments.count) utterances, not one")
        }
        let rate = Double(recorder.sampleRate)
        guard let start = recorder.arrivedAt(frame: fromFrame + Int(segment.start * rate)),
            let end = recorder.arrivedAt(frame: fromFrame + Int(segment.end * rate))
        else { throw SpeakdProcess.Failure(description: "\(server.name): no arrival time for the sound") }
        return ((start - spawned).seconds, (exited - end).seconds)
    }

    static func report(_ servers: [Server], runs: Int) {
        let speakd = servers[0]
        let peer = servers[1]
        print("spd-say -w through speakd's SSIP front and through speech-dispatcher (espeak-ng module),")
        print(
            "one null sink, \(runs) runs each after a warm-up, taking turns; timed when the sound reached the recorder")
        print("")
        print("figure                              server              median      min      max")
        for (label, values) in [
            ("spawned → first audible sample", { (server: Server) in server.first }),
            ("last audible sample → exit", { (server: Server) in server.last }),
        ] {
            for server in servers {
                let measured = values(server)
                print(
                    label.padding(toLength: 36, withPad: " ", startingAt: 0)
                        + server.name.padding(toLength: 18, withPad: " ", startingAt: 0)
                        + [median(measured), measured.min() ?? 0, measured.max() ?? 0].map {
                            ms($0).leftPadded(to: 9)
                        }.joined())
            }
        }
        let first = median(speakd.first) <= median(peer.first)
        let last = median(speakd.last) <= median(peer.last)
        print("")
        print(
            "goal, at least as fast as speech-dispatcher on both: first sample \(first ? "met" : "MISSED"), "
                + "end → exit \(last ? "met" : "MISSED")")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
