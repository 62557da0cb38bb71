import Foundation
import SpeakAPI
import SpeakTestSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `speakd-latency-bench --disk-load [--runs N] [--seconds N] [--clients N] [--posts N]`: what the
/// audit log costs a post while the disk is busy. Two release daemons on the null output, A
/// without state and B with `--state-dir` (a fresh directory under .build, on the disk, not a
/// tmpfs), side by side while `dd if=/dev/zero of=FILE bs=1M count=16 oflag=sync` loops (two of
/// them, beside B's directory) keep the disk writing. Each of `--runs` runs times:
///
/// - post latency: one client posting `"Gate four."` with `dropIfBusy` to A and B in turn (A
///   first in odd runs, B first in even ones), each answer once its `queued` row (B) is durable;
///   p50 and p99;
/// - throughput: `--clients` clients posting to one daemon at a time, A B B A in odd runs and
///   B A A B in even ones, each for half of `--seconds`: answers per second.
///
/// The clients are cheap, so that they take as little as they can of the two cores the daemons
/// share with them: each keeps one HTTP/1.1 connection to the daemon's Unix socket open and
/// posts on it from a thread of its own, with the request's bytes made once; only the status
/// line and `Content-Length` of an answer are read. The runs' ratios (B / A) are printed each,
/// then their median and spread.
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

    /// One client's connection to a daemon's Unix socket, kept open across posts (HTTP/1.1
    /// keep-alive), used from one thread. A post that fails closes it; the next one connects again.
    final class KeepAliveConnection {
        private let path: String
        private let request: [UInt8]
        private var descriptor: Int32 = -1
        private var buffer = [UInt8](repeating: 0, count: 4_096)
        /// Bytes of `buffer` read but not yet used, from `start`.
        private var start = 0
        private var end = 0

        /// - Parameters:
        ///   - path: the daemon's socket.
        ///   - body: the JSON posted to `/v1/announcements` each time.
        init(path: String, body: String) {
            self.path = path
            request = Array(
                ("POST /v1/announcements HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n" + body).utf8)
        }

        deinit { close() }

        /// Posts once; true for a 2xx answer.
        func post() -> Bool {
            if descriptor < 0, !connect() { return false }
            let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == request.count, let status = readResponse() else {
                close()
                return false
            }
            return (200..<300).contains(status)
        }

        private func connect() -> Bool {
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { return false }
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard connected == 0 else {
                close()
                return false
            }
            start = 0
            end = 0
            return true
        }

        private func close() {
            if descriptor >= 0 { _ = Glibc.close(descriptor) }
            descriptor = -1
        }

        /// Reads one answer: its status, after its head and its `Content-Length` bytes of body;
        /// nil when the connection ends or the answer cannot be read.
        private func readResponse() -> Int? {
            // The head, up to its blank line.
            var headEnd: Int?
            while headEnd == nil {
                headEnd = Self.blankLine(in: buffer, from: start, to: end)
                if headEnd == nil, !fill() { return nil }
            }
            guard let headEnd else { return nil }
            let head = String(decoding: buffer[start..<headEnd], as: UTF8.self)
            start = headEnd + 4
            let lines = head.split(separator: "\r\n")
            guard let statusLine = lines.first, statusLine.count >= 12,
                let status = Int(statusLine.dropFirst(9).prefix(3))
            else { return nil }
            var length = 0
            for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
                length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            // The body, skipped.
            while end - start < length {
                length -= end - start
                start = end
                if !fill() { return nil }
            }
            start += length
            return status
        }

        /// Reads more into the buffer (moving what is unread to its front first); false at the
        /// end of the stream or on an error.
        private func fill() -> Bool {
            if start > 0 {
                buffer.withUnsafeMutableBytes { raw in
                    _ = memmove(raw.baseAddress!, raw.baseAddress! + start, end - start)
                }
                end -= start
                start = 0
            }
            if end == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
            let received = buffer.withUnsafeMutableBytes { raw in
                recv(descriptor, raw.baseAddress! + end, raw.count - end, 0)
            }
            guard received > 0 else { return false }
            end += received
            return true
        }

        /// The index of the `\r\n\r\n` in `bytes[from..<to]`, nil when there is none yet.
        private static func blankLine(in bytes: [UInt8], from: Int, to: Int) -> Int? {
            guard to - from >= 4 else { return nil }
            for index in from...(to - 4)
            where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
                return index
            }
            return nil
        }
    }

    /// Runs `work` on a thread of its own and returns its result.
    static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    /// What one run measured, A then B.
    struct Run {
        var p50: [Double]
        var p99: [Double]
        var perSecond: [Double]
        /// Each daemon's CPU time (user and system, all its threads) per post answered in the
        /// throughput phases: what a post costs, which the rate follows when the cores are busy.
        var cpuPerPost: [Double]
        var refused: [Int]
        var p99Ratio: Double { p99[1] / p99[0] }
        var throughputRatio: Double { perSecond[1] / perSecond[0] }
    }

    static func run(speakdPath: String, runs: Int, seconds: Int, clients: Int, posts: Int) async throws {
        let base = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
            .appendingPathComponent(".build/disk-load-bench-\(UUID().uuidString.prefix(8))")
        let state = base.appendingPathComponent("state")
        try FileManager.default.createDirectory(
            at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: base) }
        let loadBefore = ScheduleBenchmark.loadAverage()
        var daemons: [SpeakdProcess] = []
        let load = DiskLoad(directory: base, loops: 2)
        var results: [Run] = []
        let body = #"{"text": "\#(text)", "dropIfBusy": true}"#
        do {
            for arguments in [[], ["--state-dir", state.path]] {
                daemons.append(
                    try await SpeakdProcess.start(executable: speakdPath, audio: "null", arguments: arguments))
            }
            print(
                "disk load: '\(text)' with dropIfBusy, speakd without state (A) and with --state-dir (B) on the null"
                    + " output, while 2 dd oflag=sync loops write beside B's state directory; \(runs) runs")
            let sockets = daemons.map(\.socketPath)
            // Warm-up: each daemon renders the text once.
            for socket in sockets {
                _ = await onThread { KeepAliveConnection(path: socket, body: body).post() }
            }
            try await Task.sleep(for: .seconds(1))
            for number in 1...runs {
                let order = number % 2 == 1 ? [0, 1] : [1, 0]
                // Latency: in turn, one post at a time, on one connection to each daemon.
                let timed = await onThread { () -> ([[Double]], [Int]) in
                    let connections = sockets.map { KeepAliveConnection(path: $0, body: body) }
                    var latency: [[Double]] = [[], []]
                    var refused = [0, 0]
                    for _ in 0..<posts {
                        for index in order {
                            let start = DispatchTime.now().uptimeNanoseconds
                            let ok = connections[index].post()
                            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                            if ok { latency[index].append(elapsed) } else { refused[index] += 1 }
                        }
                    }
                    return (latency, refused)
                }
                // Throughput: A B B A or B A A B, each half of `seconds`.
                var answered = [0, 0]
                var elapsed = [0.0, 0.0]
                var cpu = [0.0, 0.0]
                for index in order + order.reversed() {
                    let before = ProcessTable.cpuSeconds(daemons[index].pid)
                    let (count, took) = await throughput(
                        socket: sockets[index], body: body, clients: clients, seconds: seconds)
                    cpu[index] += ProcessTable.cpuSeconds(daemons[index].pid) - before
                    answered[index] += count
                    elapsed[index] += took
                }
                let result = Run(
                    p50: timed.0.map { median($0) }, p99: timed.0.map { percentile($0, 0.99) },
                    perSecond: (0..<2).map { Double(answered[$0]) / elapsed[$0] },
                    cpuPerPost: (0..<2).map { cpu[$0] / Double(max(1, answered[$0])) }, refused: timed.1)
                results.append(result)
                print(
                    String(
                        format:
                            "run %d (%@ first): p50 %.1f / %.1f ms, p99 %.1f / %.1f ms (%.2f×), %d-client posts/s %.0f / %.0f (%.2f×), CPU per post %.0f / %.0f µs; refused %d / %d",
                        number, number % 2 == 1 ? "A" : "B", result.p50[0] * 1000, result.p50[1] * 1000,
                        result.p99[0] * 1000, result.p99[1] * 1000, result.p99Ratio, clients, result.perSecond[0],
                        result.perSecond[1], result.throughputRatio, result.cpuPerPost[0] * 1e6,
                        result.cpuPerPost[1] * 1e6, result.refused[0], result.refused[1]))
            }
        } catch {
            load.stop()
            for daemon in daemons { await daemon.stop() }
            throw error
        }
        load.stop()
        for daemon in daemons { await daemon.stop() }

        let p99Ratios = results.map(\.p99Ratio)
        let throughputRatios = results.map(\.throughputRatio)
        let latencyMet = median(p99Ratios) <= 1.5
        let throughputMet = median(throughputRatios) >= 0.95
        print("")
        print(
            String(
                format:
                    "B / A over %d runs, median (lowest–highest): p99 %.2f× (%.2f–%.2f), throughput %.2f× (%.2f–%.2f)",
                runs, median(p99Ratios), p99Ratios.min() ?? .nan, p99Ratios.max() ?? .nan, median(throughputRatios),
                throughputRatios.min() ?? .nan, throughputRatios.max() ?? .nan))
        let cpuA = median(results.map { $0.cpuPerPost[0] })
        let cpuB = median(results.map { $0.cpuPerPost[1] })
        print(String(format: "CPU per post, median: A %.0f µs, B %.0f µs (%.2f×)", cpuA * 1e6, cpuB * 1e6, cpuB / cpuA))
        print(
            "goal, B's p99 ≤ 1.5 × A's: \(latencyMet ? "met" : "NOT met"); B's throughput ≥ 0.95 × A's: "
                + (throughputMet ? "met" : "NOT met") + " (by the medians)")
        print("B's state directory: \(state.path), on \(ScheduleBenchmark.fileSystem(of: state.path)).")
        print("load average before: \(loadBefore), after: \(ScheduleBenchmark.loadAverage())")
        func pair(_ values: [Double], scale: Double = 1) -> [String: Double] {
            [
                "noState": ScheduleBenchmark.rounded(values[0] * scale),
                "stateDir": ScheduleBenchmark.rounded(values[1] * scale),
            ]
        }
        ScheduleBenchmark.summary([
            "benchmark": "speakd-latency-bench --disk-load", "build": ScheduleBenchmark.build,
            "date": ScheduleBenchmark.rfc3339(Date()), "cores": ProcessInfo.processInfo.activeProcessorCount,
            "load": [loadBefore, ScheduleBenchmark.loadAverage()], "text": text, "posts": posts,
            "clients": clients, "seconds": seconds, "ddLoops": 2, "client": "keep-alive, a thread per client",
            "runs": results.map { run -> [String: Any] in
                [
                    "postP50Ms": pair(run.p50, scale: 1000), "postP99Ms": pair(run.p99, scale: 1000),
                    "postsPerSecond": pair(run.perSecond), "cpuPerPostMicroseconds": pair(run.cpuPerPost, scale: 1e6),
                    "p99Ratio": ScheduleBenchmark.rounded(run.p99Ratio),
                    "throughputRatio": ScheduleBenchmark.rounded(run.throughputRatio),
                ]
            },
            "p99Ratio": ScheduleBenchmark.rounded(median(p99Ratios)),
            "throughputRatio": ScheduleBenchmark.rounded(median(throughputRatios)),
            "cpuPerPostMicroseconds": pair([cpuA, cpuB], scale: 1e6),
            "met": latencyMet && throughputMet,
        ])
    }

    /// `clients` connections posting to the daemon at `socket` for half of `seconds`: how many
    /// answers were 2xx, and the seconds it took.
    static func throughput(socket: String, body: String, clients: Int, seconds: Int) async -> (Int, Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        let until = start + UInt64(seconds) * 500_000_000
        let counts = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<clients {
                group.addTask {
                    await onThread {
                        let connection = KeepAliveConnection(path: socket, body: body)
                        var count = 0
                        while DispatchTime.now().uptimeNanoseconds < until {
                            if connection.post() { count += 1 }
                        }
                        return count
                    }
                }
            }
            return await group.reduce(0, +)
        }
        return (counts, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}
