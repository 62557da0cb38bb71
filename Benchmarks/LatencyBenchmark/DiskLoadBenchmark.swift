import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import Synchronization

/// `speakd-latency-bench --disk-load [--seconds N] [--clients N] [--posts N]`: what the audit log
/// costs a post while the disk is busy. Two release daemons on the null output, A without state
/// and B with `--state-dir` (a fresh directory under .build, on the disk, not a tmpfs), side by
/// side in one run while `dd if=/dev/zero of=FILE bs=1M count=16 oflag=sync` loops (two of them,
/// beside B's directory) keep the disk writing. It times:
///
/// - post latency: one client posting `"Gate four."` with `dropIfBusy` to A and B in turn, each
///   answer once its `queued` row (B) is durable; p50 and p99;
/// - throughput: 50 clients posting for `--seconds` to A, then to B, then to A and B again (each
///   half the time), answers per second.
///
/// `dropIfBusy` keeps the queue from filling: an announcement that finds the output busy is
/// accepted and finished `discarded` at once, so B writes a `queued` and a `finished` row for
/// every post. The goals: B's p99 at most 1.5 times A's, B's throughput at least 0.95 of A's.
/// The dd loops are stopped and their files removed at the end, also when the run fails.
enum DiskLoadBenchmark {
    static let text = "Gate four."

    /// `dd … oflag=sync` in a loop on threads of their own, until `stop()`.
    final class DiskLoad: Sendable {
        private struct State {
            var stopped = false
            var running: [Process] = []
        }

        private let state = Mutex(State())
        let files: [String]

        init(directory: URL, loops: Int) {
            files = (0..<loops).map { directory.appendingPathComponent("dd-load-\($0)").path }
            for file in files {
                let thread = Thread { [self] in loop(file) }
                thread.start()
            }
        }

        private func loop(_ file: String) {
            while true {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/dd")
                process.arguments = ["if=/dev/zero", "of=\(file)", "bs=1M", "count=16", "oflag=sync"]
                process.standardError = FileHandle.nullDevice
                process.standardOutput = FileHandle.nullDevice
                let started = state.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    guard (try? process.run()) != nil else { return false }
                    state.running.append(process)
                    return true
                }
                guard started else { return }
                process.waitUntilExit()
                state.withLock { $0.running.removeAll { $0 === process } }
            }
        }

        /// Ends the loops (the dd running now is terminated) and removes their files.
        func stop() {
            let running = state.withLock { state in
                state.stopped = true
                return state.running
            }
            for process in running where process.isRunning { process.terminate() }
            for process in running { process.waitUntilExit() }
            for file in files { try? FileManager.default.removeItem(atPath: file) }
        }
    }

    static func run(speakdPath: String, seconds: Int, clients: Int, posts: Int) async throws {
        let base = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            .appendingPathComponent(".build/disk-load-bench-\(UUID().uuidString.prefix(8))")
        let state = base.appendingPathComponent("state")
        try FileManager.default.createDirectory(
            at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: base) }
        let loadBefore = ScheduleBenchmark.loadAverage()
        var daemons: [SpeakdProcess] = []
        let load = DiskLoad(directory: base, loops: 2)
        var latency: [[Double]] = [[], []]
        var answered: [[Int]] = [[], []]
        var refused = [0, 0]
        var elapsed: [[Double]] = [[], []]
        do {
            for arguments in [[], ["--state-dir", state.path]] {
                daemons.append(
                    try await SpeakdProcess.start(executable: speakdPath, audio: "null", arguments: arguments))
            }
            print(
                "disk load: '\(text)' with dropIfBusy, speakd without state (A) and with --state-dir (B) on the null"
                    + " output, while 2 dd oflag=sync loops write beside B's state directory")
            let body: [String: Any] = ["text": text, "dropIfBusy": true]
            let bytes = Array(try JSONSerialization.data(withJSONObject: body))
            @Sendable func post(_ client: SpeakHTTPClient) async -> Bool {
                let response = try? await client.send(
                    "POST", "/v1/announcements", headers: [("Content-Type", "application/json")], body: bytes)
                return response.map { (200..<300).contains($0.status) } ?? false
            }
            // Warm-up: each daemon renders the text once.
            for daemon in daemons { _ = await post(daemon.unixClient) }
            try await Task.sleep(for: .seconds(1))
            // Latency: in turn, A B A B …, one post at a time.
            let clock = ContinuousClock()
            for _ in 0..<posts {
                for (index, daemon) in daemons.enumerated() {
                    let start = clock.now
                    let ok = await post(daemon.unixClient)
                    if ok { latency[index].append((clock.now - start).seconds) } else { refused[index] += 1 }
                }
            }
            // Throughput: A, B, A, B, each half of `seconds`.
            for _ in 0..<2 {
                for (index, daemon) in daemons.enumerated() {
                    let until = clock.now + .milliseconds(seconds * 500)
                    let start = clock.now
                    let counts = await withTaskGroup(of: Int.self) { group in
                        for _ in 0..<clients {
                            let client = daemon.unixClient
                            group.addTask {
                                var count = 0
                                while clock.now < until {
                                    if await post(client) { count += 1 }
                                }
                                return count
                            }
                        }
                        return await group.reduce(0, +)
                    }
                    answered[index].append(counts)
                    elapsed[index].append((clock.now - start).seconds)
                }
            }
        } catch {
            load.stop()
            for daemon in daemons { await daemon.stop() }
            throw error
        }
        load.stop()
        for daemon in daemons { await daemon.stop() }

        let perSecond = (0..<2).map { Double(answered[$0].reduce(0, +)) / elapsed[$0].reduce(0, +) }
        let p50 = latency.map { median($0) }
        let p99 = latency.map { percentile($0, 0.99) }
        print("")
        print("             post p50    post p99    \(clients)-client posts/s")
        for (index, name) in ["A no state ", "B state dir"].enumerated() {
            print(
                String(
                    format: "%@  %7.1f ms  %7.1f ms  %10.1f", name, p50[index] * 1000, p99[index] * 1000,
                    perSecond[index]))
        }
        let latencyMet = p99[1] <= 1.5 * p99[0]
        let throughputMet = perSecond[1] >= 0.95 * perSecond[0]
        print(
            String(
                format: "goal, B's p99 ≤ 1.5 × A's: %@ (%.2f×); B's throughput ≥ 0.95 × A's: %@ (%.2f×)",
                latencyMet ? "met" : "NOT met", p99[1] / p99[0], throughputMet ? "met" : "NOT met",
                perSecond[1] / perSecond[0]))
        print("posts refused or failed in the latency part: A \(refused[0]), B \(refused[1])")
        print("B's state directory: \(state.path), on \(ScheduleBenchmark.fileSystem(of: state.path)).")
        print("load average before the run: \(loadBefore), after: \(ScheduleBenchmark.loadAverage())")
        ScheduleBenchmark.summary([
            "benchmark": "speakd-latency-bench --disk-load", "build": ScheduleBenchmark.build,
            "date": ScheduleBenchmark.rfc3339(Date()), "cores": ProcessInfo.processInfo.activeProcessorCount,
            "load": [loadBefore, ScheduleBenchmark.loadAverage()], "text": text, "posts": posts,
            "clients": clients, "seconds": seconds, "ddLoops": 2,
            "postMs": [
                "noState": [
                    "p50": ScheduleBenchmark.rounded(p50[0] * 1000), "p99": ScheduleBenchmark.rounded(p99[0] * 1000),
                ],
                "stateDir": [
                    "p50": ScheduleBenchmark.rounded(p50[1] * 1000), "p99": ScheduleBenchmark.rounded(p99[1] * 1000),
                ],
            ],
            "postsPerSecond": [
                "noState": ScheduleBenchmark.rounded(perSecond[0]), "stateDir": ScheduleBenchmark.rounded(perSecond[1]),
            ],
            "p99Ratio": ScheduleBenchmark.rounded(p99[1] / p99[0]),
            "throughputRatio": ScheduleBenchmark.rounded(perSecond[1] / perSecond[0]),
            "met": latencyMet && throughputMet,
        ])
    }
}
