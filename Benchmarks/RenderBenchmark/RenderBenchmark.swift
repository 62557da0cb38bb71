import CEspeakNG
import EspeakEngine
import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeechModel

/// Renders per second through speakd against raw libespeak-ng, and speakd's idle memory.
///
/// - raw: this executable started twice in `--raw` mode, each one libespeak-ng rendering
///   `text` in a loop (synchronous mode): renders per second, summed. It renders the espeak input
///   speakd's workers are given for `text` (voice, rate, volume, with the project's `Voices/`), and
///   the audio per render of both sides is printed, so the two are seen to make the same sound;
/// - speakd: the `speakd` built beside this executable, `--audio null`, with extra flags from
///   `--speakd-args "…"` or `SPEAKD_BENCH_ARGS` (e.g. `--engine-workers 2` where it exists),
///   hammered with what an outside client sends: `POST /v1/speech?raw=true` with the same body
///   (`--text`, `--language`; default `{"text": "Email refreshed, 4 new items", "language":
///   "en-US"}`) over `--clients` (default 4) connections by `wrk` over TCP with keep-alive and the
///   bearer token (Debian's `wrk`; without it, by `SpeakHTTPClient` over the Unix socket, a
///   connection per request): requests per second and the ratio to raw (goal ≥ 0.6). Two daemons
///   answer, on two paths: one with the render cache off (`--render-cache-mib 0`), where every
///   request is rendered by a worker, the path the goal is about; and one as installed (the render
///   cache on), where the same text again is answered from the cache;
/// - raw and speakd take turns, `--rounds` (default 3) phases of each, and the ratio is the
///   median round's: a shared machine's speed drifts, and phases run side by side compare better;
/// - CPU time per request of speakd, of its workers and of the client, beside raw CPU per render
///   (from `/proc/PID/stat` and `getrusage`): where the time goes, and a ratio that holds even
///   when other work shares the cores;
/// - idle memory: PSS (`/proc/PID/smaps_rollup`) of speakd and every descendant process three
///   seconds after it started, before any request, and again after the load has stopped and it
///   has been idle a few seconds (goal ≤ 30 MB), beside speech-dispatcher's: a running one's,
///   else that of a private one the benchmark starts when it is installed.
///
/// Usage: `speakd-render-bench [--seconds N] [--rounds N] [--clients N] [--text T] [--language TAG] [--speakd-args "…"]` (build with `scripts/build-release`).
@main
struct RenderBenchmark {
    /// The body's text and language unless `--text` and `--language` say otherwise.
    static let defaultText = "Email refreshed, 4 new items"
    static let defaultLanguage = "en-US"

    static func main() async throws {
        let arguments = CommandLine.arguments
        let seconds = value(arguments, "--seconds").flatMap(Double.init) ?? 30
        let text = value(arguments, "--text") ?? defaultText
        let language = value(arguments, "--language") ?? defaultLanguage
        if arguments.contains("--raw") {
            try await rawLoop(text: text, language: language, seconds: seconds)
            return
        }
        let body = ["text": text, "language": language]
        let clients = value(arguments, "--clients").flatMap(Int.init) ?? 4
        let extra =
            (value(arguments, "--speakd-args") ?? ProcessInfo.processInfo.environment["SPEAKD_BENCH_ARGS"] ?? "")
            .split(separator: " ").map(String.init)
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let speakdPath = here.deletingLastPathComponent().appendingPathComponent("speakd").path
        guard FileManager.default.isExecutableFile(atPath: speakdPath) else {
            FileHandle.standardError.write(Data("no speakd beside this executable at \(speakdPath)\n".utf8))
            exit(1)
        }
        let rounds = max(value(arguments, "--rounds").flatMap(Int.init) ?? 3, 1)
        // A third each for raw, speakd rendering and speakd answering from its cache, in `rounds`
        // alternating phases; the rest of the run is idle settling.
        let phase = max(seconds * 0.3 / Double(rounds), 2)

        // The render cache off: the same text is rendered each time, as raw libespeak-ng renders it.
        let daemon = try await SpeakdProcess.start(
            executable: speakdPath, audio: "null", arguments: extra + ["--render-cache-mib", "0"])
        // As installed: the render cache on, so the same text again is one lookup.
        let cached = try await SpeakdProcess.start(executable: speakdPath, audio: "null", arguments: extra)
        // Idle as a kiosk starts: workers started, nothing rendered yet.
        try await Task.sleep(for: .seconds(3))
        let startedPSS = try processTreePSS(root: daemon.pid)
        let wrk = executableOnPath("wrk")
        // Raw and speakd take turns, each round one phase of each: the speed of a shared machine
        // drifts over a minute, and a ratio of two phases run side by side holds better than one
        // of two runs far apart. The figure is the median round's.
        var measured: [Round] = []
        for _ in 0..<rounds {
            let raw = try await rawRate(
                executable: here.path, text: text, language: language, processes: 2, seconds: phase)
            let cpuBefore = (tree: treeCPUSeconds(root: daemon.pid), client: ownCPUSeconds())
            let served =
                if let wrk {
                    try serveWithWrk(wrk, daemon: daemon, body: body, connections: clients, seconds: phase)
                } else {
                    try await serve(daemon.unixClient, body: body, clients: clients, seconds: phase)
                }
            let cpuAfter = (tree: treeCPUSeconds(root: daemon.pid), client: ownCPUSeconds())
            let fromCache =
                if let wrk {
                    try serveWithWrk(wrk, daemon: cached, body: body, connections: clients, seconds: phase)
                } else {
                    try await serve(cached.unixClient, body: body, clients: clients, seconds: phase)
                }
            measured.append(
                Round(
                    raw: raw, rate: served.rate, requests: served.requests, failures: served.failures,
                    daemonCPU: cpuAfter.tree.root - cpuBefore.tree.root,
                    workersCPU: cpuAfter.tree.descendants - cpuBefore.tree.descendants,
                    clientCPU: served.clientCPU ?? (cpuAfter.client - cpuBefore.client),
                    cachedRate: fromCache.rate, cachedFailures: fromCache.failures))
        }
        _ = await cached.stop()
        // One more response, read whole: the audio speakd made, to set beside the raw renders'.
        let wav = try await daemon.speech(json: try JSONEncoder().encode(body), raw: true)
        let requests = max(Double(measured.map(\.requests).reduce(0, +)), 1)
        let cpu = (
            raw: measured.map { $0.raw.cpuPerRender }.reduce(0, +) / Double(rounds),
            daemon: measured.map(\.daemonCPU).reduce(0, +) / requests,
            workers: measured.map(\.workersCPU).reduce(0, +) / requests,
            client: measured.map(\.clientCPU).reduce(0, +) / requests
        )
        let median = measured.sorted { $0.ratio < $1.ratio }[rounds / 2]
        let failures = measured.map { $0.failures + $0.cachedFailures }.reduce(0, +)
        let cachedMedian = measured.sorted { $0.cachedRatio < $1.cachedRatio }[rounds / 2]
        try await Task.sleep(for: .seconds(max(seconds - 2 * phase * Double(rounds), 3)))
        let pss = try processTreePSS(root: daemon.pid)
        let running = speechDispatcherPSS()
        _ = await daemon.stop()
        // A private one only once speakd is gone: the two share libespeak-ng and libpulse.
        let dispatcher = if let running { (running, "running") } else { await privateSpeechDispatcherPSS() }

        print(
            "speakd render benchmark: '\(text)' (\(language)), \(rounds) rounds of \(Int(phase)) s each of raw, speakd rendering and speakd's cache, speakd \(extra.joined(separator: " "))"
        )
        let load =
            wrk == nil
            ? "\(clients) clients over the Unix socket" : "wrk, \(clients) connections over TCP with the token"
        print("raw: libespeak-ng in 2 processes; speakd: POST /v1/speech?raw=true from \(load)")
        print(
            "rendering: --render-cache-mib 0, a worker renders every request; cache: as installed, the render cache on")
        print(pad("measure", 36) + pad("figure", 16) + "goal")
        for (index, round) in measured.enumerated() {
            print(
                pad("round \(index + 1): raw; rendering; cache", 36)
                    + pad(
                        String(
                            format: "%.1f renders/s, %.1f req/s: %.2f, %.1f req/s: %.2f", round.raw.rate, round.rate,
                            round.ratio, round.cachedRate, round.cachedRatio), 16)
            )
        }
        print(
            pad("speakd rendering / raw (median round)", 36)
                + pad(
                    String(format: "%.2f (%.1f / %.1f)", median.ratio, median.rate, median.raw.rate), 16) + "≥ 0.60")
        print(
            pad("speakd from its cache / raw (median)", 36)
                + pad(
                    String(
                        format: "%.2f (%.1f / %.1f)", cachedMedian.cachedRatio, cachedMedian.cachedRate,
                        cachedMedian.raw.rate), 16) + "-")
        // At the WAV's sample rate; the raw renders come from the same libespeak-ng and data.
        let rate = Double(wav.sampleRate)
        let audio = (speakd: Double(wav.samples.count) / rate, raw: Double(median.raw.samples) / rate)
        print(
            pad("audio per render: speakd, raw", 36)
                + pad(String(format: "%.3f s, %.3f s", audio.speakd, audio.raw), 16) + "same")
        print(pad("CPU per raw render", 36) + pad(milliseconds(cpu.raw), 16) + "-")
        print(pad("CPU per request: speakd", 36) + pad(milliseconds(cpu.daemon), 16) + "-")
        print(pad("CPU per request: its workers", 36) + pad(milliseconds(cpu.workers), 16) + "-")
        print(pad("CPU per request: the HTTP client", 36) + pad(milliseconds(cpu.client), 16) + "-")
        print(
            pad("raw CPU / (speakd + workers) CPU", 36)
                + pad(String(format: "%.2f", cpu.raw / max(cpu.daemon + cpu.workers, 1e-9)), 16) + "-")
        print(pad("failed requests", 36) + pad("\(failures)", 16) + "0")
        print(
            pad("speakd idle PSS at start (\(startedPSS.processes) proc.)", 36)
                + pad(String(format: "%.1f MB", Double(startedPSS.kilobytes) / 1024), 16) + "≤ 30 MB")
        print(
            pad("speakd idle PSS after load (\(pss.processes) proc.)", 36)
                + pad(String(format: "%.1f MB", Double(pss.kilobytes) / 1024), 16) + "≤ 30 MB")
        print("  (this benchmark maps the Swift runtime too, which lowers speakd's PSS; scripts/idle-memory")
        print("   measures speakd alone)")
        if let (measured, kind) = dispatcher {
            print(
                pad("speech-dispatcher idle PSS (\(kind), \(measured.processes) proc.)", 36)
                    + pad(String(format: "%.1f MB", Double(measured.kilobytes) / 1024), 16) + "-")
        } else {
            let reason = executableOnPath("speech-dispatcher") == nil ? "not installed" : "did not start"
            print(pad("speech-dispatcher idle PSS", 36) + pad(reason, 16) + "-")
        }
    }

    /// One round: a raw phase and the speakd phase after it.
    struct Round {
        var raw: (rate: Double, cpuPerRender: Double, samples: Int)
        var rate: Double
        var requests: Int
        var failures: Int
        var daemonCPU: Double
        var workersCPU: Double
        var clientCPU: Double
        /// The daemon with the render cache on, asked for the same text.
        var cachedRate: Double
        var cachedFailures: Int
        var ratio: Double { rate / max(raw.rate, 1e-9) }
        var cachedRatio: Double { cachedRate / max(raw.rate, 1e-9) }
    }

    static func value(_ arguments: [String], _ flag: String) -> String? {
        guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }

    static func milliseconds(_ seconds: Double) -> String { String(format: "%.3f ms", seconds * 1000) }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    /// `--raw`: one libespeak-ng rendering `text` until `seconds` are up; prints the count, the
    /// time, the CPU seconds of the loop and the samples of one render.
    ///
    /// libespeak-ng is initialised with the data directory speakd's engine uses and given the
    /// input speakd compiles for `text`; every call in the loop is libespeak-ng's own, on one thread.
    static func rawLoop(text: String, language: String, seconds: Double) async throws {
        let engine = try await EspeakEngine(voices: VoicesDirectory.discover())
        var defaults = SpeechAttributes()
        defaults.language = try LanguageTag(language)
        let input = try engine.espeakInput(for: Utterance(text, defaults: defaults))
        let flags = input.isMarkup ? UInt32(espeakSSML) | UInt32(espeakPHONEMES) : 0
        let line = try await engine.runExclusively {
            rawRenders(
                seconds: seconds, voice: input.voice, rate: input.rate, volume: input.volume, text: input.text,
                flags: flags)
        }
        print(line)
    }

    /// Renders `text` until `seconds` are up (espeak-ng initialised); "count time cpu samples".
    static func rawRenders(seconds: Double, voice: String, rate: Int, volume: Int, text: String, flags: UInt32)
        -> String
    {
        espeak_SetSynthCallback { _, count, events in
            if count > 0, let counter = events?.pointee.user_data?.assumingMemoryBound(to: Int.self) {
                counter.pointee += Int(count)
            }
            return 0
        }
        _ = espeak_ng_SetVoiceByName(voice)
        _ = espeak_ng_SetParameter(espeakRATE, CInt(rate), 0)
        _ = espeak_ng_SetParameter(espeakVOLUME, CInt(volume), 0)
        _ = espeak_ng_SetParameter(espeakPITCH, 50, 0)
        _ = espeak_ng_SetParameter(espeakRANGE, 50, 0)
        var samples = 0
        let start = Date()
        let cpu = ownCPUSeconds()
        var count = 0
        while Date().timeIntervalSince(start) < seconds {
            samples = 0
            text.withCString { pointer in
                _ = espeak_ng_Synthesize(
                    pointer, strlen(pointer) + 1, 0, POS_CHARACTER, 0,
                    UInt32(espeakCHARS_UTF8) | UInt32(espeakENDPAUSE) | flags, nil, &samples)
            }
            count += 1
        }
        return "\(count) \(Date().timeIntervalSince(start)) \(ownCPUSeconds() - cpu) \(samples)"
    }

    /// Starts `processes` copies of this executable in `--raw` mode at once: renders per second,
    /// summed, CPU seconds per render, and the samples of one render.
    static func rawRate(executable: String, text: String, language: String, processes: Int, seconds: Double)
        async throws -> (
            rate: Double, cpuPerRender: Double, samples: Int
        )
    {
        let children = try (0..<processes).map { _ in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--raw", "--seconds", String(seconds), "--text", text, "--language", language]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            return (process, pipe)
        }
        var total = 0.0
        var renders = 0.0
        var cpu = 0.0
        var samples = 0
        for (process, pipe) in children {
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let fields = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isWhitespace)
            guard fields.count == 4, let count = Double(fields[0]), let elapsed = Double(fields[1]), elapsed > 0,
                let seconds = Double(fields[2]), let rendered = Int(fields[3])
            else {
                throw SpeakdProcess.Failure(
                    description: "raw child printed '\(String(decoding: output, as: UTF8.self))'")
            }
            total += count / elapsed
            renders += count
            cpu += seconds
            samples = rendered
        }
        return (total, renders > 0 ? cpu / renders : 0, samples)
    }

    /// CPU seconds (user and system) this process has used.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return cpuSeconds(usage)
    }

    /// CPU seconds used so far by `pid` and by each of its descendants, separately.
    static func treeCPUSeconds(root: pid_t) -> (root: Double, descendants: Double) {
        (
            ProcessTable.cpuSeconds(root),
            ProcessTable.tree(of: root).dropFirst().map(ProcessTable.cpuSeconds).reduce(0, +)
        )
    }

    /// `clients` concurrent loops of `POST /v1/speech` until `seconds` are up.
    static func serve(_ client: SpeakHTTPClient, body: [String: String], clients: Int, seconds: Double) async throws
        -> (rate: Double, requests: Int, failures: Int, clientCPU: Double?)
    {
        let body = Array(try JSONEncoder().encode(body))
        // Warm up the voice once.
        _ = try await client.send(
            "POST", "/v1/speech?raw=true", headers: [("Content-Type", "application/json")], body: body)
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var done = 0
                    var failed = 0
                    while ContinuousClock.now < deadline {
                        let response = try await client.send(
                            "POST", "/v1/speech?raw=true", headers: [("Content-Type", "application/json")], body: body)
                        if response.status == 200 { done += 1 } else { failed += 1 }
                    }
                    return (done, failed)
                }
            }
            var sum = (0, 0)
            for try await result in group { sum = (sum.0 + result.0, sum.1 + result.1) }
            return sum
        }
        let elapsed = start.duration(to: .now)
        let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return (Double(results.0) / elapsedSeconds, results.0 + results.1, results.1, nil)
    }

    /// The same load from `wrk` (one thread, `connections` keep-alive connections over TCP), as
    /// a client library with a connection pool would send it; the HTTP client's CPU is wrk's.
    static func serveWithWrk(
        _ wrk: String, daemon: SpeakdProcess, body: [String: String], connections: Int, seconds: Double
    ) throws -> (rate: Double, requests: Int, failures: Int, clientCPU: Double?) {
        let script = daemon.directory.appendingPathComponent("post.lua")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = String(decoding: try encoder.encode(body), as: UTF8.self)
        try """
        wrk.method = "POST"
        wrk.body = '\(body)'
        wrk.headers["Content-Type"] = "application/json"
        done = function(summary, latency, requests)
          io.write(string.format("speakd-bench %d %d %d\\n", summary.requests,
            summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
              + summary.errors.timeout, summary.duration))
        end
        """.write(to: script, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: wrk)
        process.arguments = [
            "-t1", "-c\(connections)", "-d\(Int(seconds.rounded(.up)))s", "-s", script.path,
            "-H", "Authorization: Bearer \(daemon.token ?? "")", "http://127.0.0.1:\(daemon.port)/v1/speech?raw=true",
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        var before = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &before)
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var after = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &after)
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("speakd-bench ") }),
            case let fields = line.split(separator: " ").compactMap({ Int($0) }), fields.count == 3, fields[2] > 0
        else {
            throw SpeakdProcess.Failure(description: "wrk printed '\(output)'")
        }
        let seconds = Double(fields[2]) / 1e6
        return (Double(fields[0] - fields[1]) / seconds, fields[0], fields[1], cpuSeconds(after) - cpuSeconds(before))
    }

    static func cpuSeconds(_ usage: rusage) -> Double {
        Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The full path of `name` on `PATH`, if it is there.
    static func executableOnPath(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// PSS in kB of `root` and all its descendants.
    static func processTreePSS(root: pid_t) throws -> (kilobytes: Int, processes: Int) {
        let all = ProcessTable.tree(of: root)
        return (all.map(pss).reduce(0, +), all.count)
    }

    /// The `Pss:` line of `/proc/PID/smaps_rollup`, in kB; 0 when the process is gone.
    static func pss(_ pid: pid_t) -> Int {
        guard let rollup = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return 0 }
        for line in rollup.split(separator: "\n") where line.hasPrefix("Pss:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    /// A private speech-dispatcher's idle tree, when one is installed (Debian's
    /// `speech-dispatcher` and `speech-dispatcher-espeak-ng`): started with the system's
    /// configuration but its own socket, runtime and log directory and no idle timeout, measured
    /// once it has started its output modules and settled, then stopped. Of its modules the
    /// espeak-ng one stays; the others end at once when they find nothing to drive.
    static func privateSpeechDispatcherPSS() async -> ((kilobytes: Int, processes: Int), String)? {
        guard let executable = executableOnPath("speech-dispatcher") else { return nil }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("speakd-bench-spd-\(getpid())", isDirectory: true)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--run-single", "--timeout", "0", "--communication-method", "unix_socket", "--socket-path",
            directory.appendingPathComponent("socket").path, "--pid-file", directory.appendingPathComponent("pid").path,
            "--log-dir", directory.path,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = directory.path
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        defer {
            // SIGTERM leaves it waiting on its modules for minutes: the whole tree goes at once.
            for pid in ProcessTable.tree(of: process.processIdentifier).reversed() { kill(pid, SIGKILL) }
            process.waitUntilExit()
        }
        try? await Task.sleep(for: .seconds(5))
        guard process.isRunning, let measured = try? processTreePSS(root: process.processIdentifier),
            measured.processes > 1
        else { return nil }
        return (measured, "private")
    }

    /// speech-dispatcher's tree, when a `speech-dispatcher` process is running.
    static func speechDispatcherPSS() -> (kilobytes: Int, processes: Int)? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry),
                let name = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8),
                name.trimmingCharacters(in: .whitespacesAndNewlines) == "speech-dispatch"
            else { continue }
            return try? processTreePSS(root: pid)
        }
        return nil
    }
}
