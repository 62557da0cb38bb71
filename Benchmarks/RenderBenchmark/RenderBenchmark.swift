import CEspeakNG
import Foundation
import SpeakAPI
import SpeakTestSupport

/// Renders per second through speakd against raw libespeak-ng, and speakd's idle memory.
///
/// - raw: this executable started twice in `--raw` mode, each one libespeak-ng rendering
///   `text` in a loop (synchronous mode, voice en-us): renders per second, summed;
/// - speakd: the `speakd` built beside this executable, `--audio null`, with extra flags from
///   `--speakd-args "…"` or `SPEAKD_BENCH_ARGS` (e.g. `--engine-workers 2` where it exists),
///   hammered with `POST /v1/speech` for the same text by `--clients` (default 3) concurrent
///   clients over the Unix socket: requests per second and the ratio to raw (goal ≥ 0.8);
/// - idle memory: PSS (`/proc/PID/smaps_rollup`) of speakd and every descendant process after
///   the load has stopped and it has been idle a few seconds (goal ≤ 30 MB), beside
///   speech-dispatcher's when one is running (see the README).
///
/// Usage: `speakd-render-bench [--seconds N] [--clients N] [--speakd-args "…"]` (build with `-c release`).
@main
struct RenderBenchmark {
    static let text = "Platform 4: the 10:15 to Porto"

    static func main() async throws {
        let arguments = CommandLine.arguments
        let seconds = value(arguments, "--seconds").flatMap(Double.init) ?? 30
        if arguments.contains("--raw") {
            rawLoop(seconds: seconds)
            return
        }
        let clients = value(arguments, "--clients").flatMap(Int.init) ?? 3
        let extra =
            (value(arguments, "--speakd-args") ?? ProcessInfo.processInfo.environment["SPEAKD_BENCH_ARGS"] ?? "")
            .split(separator: " ").map(String.init)
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let speakdPath = here.deletingLastPathComponent().appendingPathComponent("speakd").path
        guard FileManager.default.isExecutableFile(atPath: speakdPath) else {
            FileHandle.standardError.write(Data("no speakd beside this executable at \(speakdPath)\n".utf8))
            exit(1)
        }
        // Two fifths each for raw and speakd under load; the rest of the run is idle settling.
        let phase = max(seconds * 0.4, 2)

        let raw = try await rawRate(executable: here.path, processes: 2, seconds: phase)
        let daemon = try await SpeakdProcess.start(executable: speakdPath, audio: "null", arguments: extra)
        let served = try await serve(daemon.unixClient, clients: clients, seconds: phase)
        try await Task.sleep(for: .seconds(max(seconds - 2 * phase, 3)))
        let pss = try processTreePSS(root: daemon.pid)
        let dispatcher = speechDispatcherPSS()
        _ = await daemon.stop()

        print("speakd render benchmark: '\(text)', \(Int(phase)) s per phase, speakd \(extra.joined(separator: " "))")
        print(pad("measure", 36) + pad("figure", 16) + "goal")
        print(pad("raw libespeak-ng, 2 processes", 36) + pad(String(format: "%.1f renders/s", raw), 16) + "-")
        print(
            pad("speakd, \(clients) clients over Unix socket", 36)
                + pad(String(format: "%.1f req/s", served.rate), 16) + "-")
        print(pad("speakd / raw", 36) + pad(String(format: "%.2f", served.rate / raw), 16) + "≥ 0.80")
        print(pad("failed requests", 36) + pad("\(served.failures)", 16) + "0")
        print(
            pad("speakd idle PSS (\(pss.processes) processes)", 36)
                + pad(String(format: "%.1f MB", Double(pss.kilobytes) / 1024), 16) + "≤ 30 MB")
        if let dispatcher {
            print(
                pad("speech-dispatcher idle PSS (\(dispatcher.processes))", 36)
                    + pad(String(format: "%.1f MB", Double(dispatcher.kilobytes) / 1024), 16) + "-")
        } else {
            print(pad("speech-dispatcher idle PSS", 36) + pad("not running", 16) + "-")
        }
    }

    static func value(_ arguments: [String], _ flag: String) -> String? {
        guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    /// `--raw`: one libespeak-ng rendering `text` until `seconds` are up; prints the count and the time.
    static func rawLoop(seconds: Double) {
        _ = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, nil, 0)
        espeak_SetSynthCallback { _, _, _ in 0 }
        _ = espeak_ng_SetVoiceByName("en-us")
        let start = Date()
        var count = 0
        while Date().timeIntervalSince(start) < seconds {
            text.withCString { pointer in
                _ = espeak_ng_Synthesize(
                    pointer, strlen(pointer) + 1, 0, POS_CHARACTER, 0,
                    UInt32(espeakCHARS_UTF8) | UInt32(espeakENDPAUSE), nil, nil)
            }
            count += 1
        }
        print("\(count) \(Date().timeIntervalSince(start))")
    }

    /// Starts `processes` copies of this executable in `--raw` mode at once; renders per second, summed.
    static func rawRate(executable: String, processes: Int, seconds: Double) async throws -> Double {
        let children = try (0..<processes).map { _ in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--raw", "--seconds", String(seconds)]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            return (process, pipe)
        }
        var total = 0.0
        for (process, pipe) in children {
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let fields = String(decoding: output, as: UTF8.self).split(separator: " ")
            guard fields.count == 2, let count = Double(fields[0]),
                let elapsed = Double(fields[1].trimmingCharacters(in: .whitespacesAndNewlines)), elapsed > 0
            else {
                throw SpeakdProcess.Failure(
                    description: "raw child printed '\(String(decoding: output, as: UTF8.self))'")
            }
            total += count / elapsed
        }
        return total
    }

    /// `clients` concurrent loops of `POST /v1/speech` until `seconds` are up.
    static func serve(_ client: SpeakHTTPClient, clients: Int, seconds: Double) async throws -> (
        rate: Double, failures: Int
    ) {
        let body = Array(try JSONSerialization.data(withJSONObject: ["text": text]))
        // Warm up the voice once.
        _ = try await client.send("POST", "/v1/speech", headers: [("Content-Type", "application/json")], body: body)
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var done = 0
                    var failed = 0
                    while ContinuousClock.now < deadline {
                        let response = try await client.send(
                            "POST", "/v1/speech", headers: [("Content-Type", "application/json")], body: body)
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
        return (Double(results.0) / elapsedSeconds, results.1)
    }

    /// PSS in kB of `root` and all its descendants, found through `/proc/PID/task/*/children`.
    static func processTreePSS(root: pid_t) throws -> (kilobytes: Int, processes: Int) {
        var pending = [Int(root)]
        var seen = Set<Int>()
        var total = 0
        while let pid = pending.popLast() {
            guard seen.insert(pid).inserted else { continue }
            total += pss(pid)
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            for task in tasks {
                let children =
                    (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
                pending += children.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            }
        }
        return (total, seen.count)
    }

    /// The `Pss:` line of `/proc/PID/smaps_rollup`, in kB; 0 when the process is gone.
    static func pss(_ pid: Int) -> Int {
        guard let rollup = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return 0 }
        for line in rollup.split(separator: "\n") where line.hasPrefix("Pss:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    /// speech-dispatcher's tree, when a `speech-dispatcher` process is running (the benchmark does
    /// not start one: its configuration and modules are the user's).
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
