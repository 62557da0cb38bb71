import Foundation
import SpeakTestSupport

/// An idle speakd: what it costs when nobody speaks.
///
/// Starts a private PulseAudio server with a null sink and the built `speakd` on it with
/// `--engine-workers N` (default 2), lets it settle, and then, with no request:
///
/// - idle memory: the PSS of the daemon, its worker template and each worker
///   (`/proc/PID/smaps_rollup`), their sum, the sum by mapping (`/proc/PID/smaps`: the
///   daemon's binary, each library, heap, stacks), largest first, and, run as root, the same
///   PSS counted from the physical pages as if the sound server were the only other process, and
///   as if nothing else ran (`ownPages`);
/// - idle wake-ups: the context switches, voluntary and involuntary, of every thread of the daemon
///   and of its descendants over `--seconds` (default 10), from `/proc/PID/task/TID/status`,
///   printed as wake-ups per second (DESIGN's limit: 1) with the threads that woke.
///
/// This program maps the Swift runtime too, so the PSS it reads is lower than `scripts/idle-memory`'s,
/// which reads from a shell, and both read lower beside other Swift processes; the tree's own
/// pages do not depend on what else runs. Build speakd first (`swift build -c release`
/// or `scripts/build-release`); `--speakd PATH` runs another build.
@main
struct IdleBenchmark {
    static func main() async throws {
        var workers = 2
        var settle = 6.0
        var seconds = 10.0
        var runs = 1
        var speakd: String?
        var top = 12
        var arguments = CommandLine.arguments.dropFirst()
        while let flag = arguments.popFirst() {
            guard let value = arguments.popFirst() else {
                exitSaying("speakd-idle-bench: \(flag) needs a value", status: 2)
            }
            switch flag {
            case "--workers": workers = Int(value) ?? workers
            case "--settle": settle = Double(value) ?? settle
            case "--seconds": seconds = Double(value) ?? seconds
            case "--runs": runs = Int(value) ?? runs
            case "--speakd": speakd = value
            case "--top": top = Int(value) ?? top
            default: exitSaying("speakd-idle-bench: unknown option \(flag)", status: 2)
            }
        }
        let server = try await PulseAudioServer.start(sinkName: "idle_bench")
        var wakeRates: [Double] = []
        var sums: [Int] = []
        var quiet: [Int] = []
        for run in 1...runs {
            let daemon = try await SpeakdProcess.start(
                executable: speakd, audio: "pulse", arguments: ["--engine-workers", "\(workers)"],
                environment: server.environment)
            try await Task.sleep(for: .seconds(settle))
            let processes = ProcessTable.tree(of: daemon.pid)
            var sum = 0
            var line = ""
            for pid in processes {
                let pss = Self.pss(pid)
                sum += pss
                line += " \(Self.comm(pid))=\(Self.mib(pss))"
            }
            print("run \(run): \(processes.count) processes, PSS \(sum) KiB (\(Self.mib(sum)) MiB):\(line)")
            if let own = Self.ownPages(processes, others: [server.pid]) {
                print(
                    "run \(run): PSS beside the sound server alone \(own.beside) KiB (\(Self.mib(own.beside)) MiB);"
                        + " with nothing else running \(own.alone) KiB (\(Self.mib(own.alone)) MiB)")
                quiet.append(own.beside)
            }
            var byMapping: [String: Int] = [:]
            for pid in processes {
                for (mapping, pss) in Self.pssByMapping(pid) { byMapping[mapping, default: 0] += pss }
            }
            for (mapping, pss) in byMapping.sorted(by: { $0.value > $1.value }).prefix(top) {
                print("  \(String(repeating: " ", count: max(0, 6 - "\(pss)".count)))\(pss) KiB  \(mapping)")
            }

            let before = ProcessTable.threadSwitches(of: daemon.pid)
            try await Task.sleep(for: .seconds(seconds))
            let woken = ProcessTable.wakeups(from: before, to: ProcessTable.threadSwitches(of: daemon.pid))
            let total = woken.reduce(0) { $0 + $1.switches }
            let rate = Double(total) / seconds
            print(
                String(
                    format: "run %d: %d wake-ups in %.0f s over %d threads: %.2f per second (limit 1)", run, total,
                    seconds, before.count, rate))
            for thread in woken.prefix(top) { print("  \(thread.switches)  \(thread.name) (pid \(thread.pid))") }
            wakeRates.append(rate)
            sums.append(sum)
            _ = await daemon.stop()
        }
        if runs > 1 {
            let alone =
                quiet.isEmpty
                ? "" : ", beside the sound server alone \(Self.mib(quiet.min()!))–\(Self.mib(quiet.max()!)) MiB"
            print(
                "\(runs) runs: PSS \(Self.mib(sums.min()!))–\(Self.mib(sums.max()!)) MiB\(alone), wake-ups "
                    + String(format: "%.2f–%.2f per second", wakeRates.min()!, wakeRates.max()!))
        }
        await server.stop()
    }

    /// PSS without the noise of other processes, in KiB, from the physical pages of
    /// `/proc/PID/pagemap` (which only root reads; nil otherwise).
    ///
    /// PSS splits a shared page among every process that maps it, so a sum read beside other Swift
    /// programs (a build, a test run, this benchmark) is lower by up to several MiB. `alone` counts
    /// each page of the tree once: its PSS if nothing else ran. `beside` splits each page only with
    /// the `others` that map it too (the sound server): the PSS a quiet kiosk would read.
    static func ownPages(_ processes: [pid_t], others: [pid_t]) -> (alone: Int, beside: Int)? {
        var mappers: [UInt64: Int] = [:]
        for pid in processes {
            for frame in frames(pid) { mappers[frame, default: 0] += 1 }
        }
        guard !mappers.isEmpty else { return nil }
        var shared: [UInt64: Int] = [:]
        for pid in others {
            for frame in Set(frames(pid)) where mappers[frame] != nil { shared[frame, default: 0] += 1 }
        }
        let beside = mappers.reduce(0.0) { sum, page in
            sum + 4 * Double(page.value) / Double(page.value + shared[page.key, default: 0])
        }
        return (mappers.count * 4, Int(beside.rounded()))
    }

    /// The frame numbers of every present page `pid` maps, one entry per mapping of a page.
    static func frames(_ pid: pid_t) -> [UInt64] {
        let pagemap = open("/proc/\(pid)/pagemap", O_RDONLY)
        guard pagemap >= 0, let maps = ProcessTable.procFile("/proc/\(pid)/maps") else {
            if pagemap >= 0 { close(pagemap) }
            return []
        }
        defer { close(pagemap) }
        var frames: [UInt64] = []
        var entries = [UInt64](repeating: 0, count: 4096)
        for line in maps.split(separator: "\n") where !line.hasSuffix("[vsyscall]") {
            let range = line.prefix { $0 != " " }.split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard range.count == 2 else { continue }
            // In pieces of at most 4,096 pages; a read may return fewer.
            var page = range[0] / 4096
            while page < range[1] / 4096 {
                let count = Int(min(range[1] / 4096 - page, UInt64(entries.count)))
                let read = entries.withUnsafeMutableBytes { pread(pagemap, $0.baseAddress, count * 8, off_t(page * 8)) }
                guard read >= 8 else { break }
                for entry in entries.prefix(read / 8) {
                    // Present, with its frame number (bits 0-54); 0 when the reader is not root.
                    let frame = entry & (1 << 55 - 1)
                    if entry >> 63 == 1, frame != 0 { frames.append(frame) }
                }
                page += UInt64(read / 8)
            }
        }
        return frames
    }

    /// `Pss:` of `/proc/PID/smaps_rollup` in KiB; 0 when the process is gone.
    static func pss(_ pid: pid_t) -> Int {
        let text = ProcessTable.procFile("/proc/\(pid)/smaps_rollup") ?? ""
        return kib(text.split(separator: "\n").first { $0.hasPrefix("Pss:") })
    }

    /// PSS in KiB by what is mapped: a file's path (its writable part marked), `[heap]`,
    /// `[stack]`, or `[anon]` for anonymous mappings (thread stacks, malloc arenas, runtime data).
    static func pssByMapping(_ pid: pid_t) -> [String: Int] {
        var sums: [String: Int] = [:]
        for mapping in ProcessTable.mappings(of: pid) {
            let written = mapping.permissions.contains("w") && mapping.path.hasPrefix("/")
            let name = mapping.path.isEmpty ? "[anon]" : mapping.path + (written ? " (written)" : "")
            sums[name, default: 0] += mapping.pssKiB
        }
        return sums
    }

    static func kib(_ line: Substring?) -> Int {
        line.flatMap { $0.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { Int($0) } } ?? 0
    }

    static func comm(_ pid: pid_t) -> String {
        ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func mib(_ kib: Int) -> String { String(format: "%.1f", Double(kib) / 1024) }
}

func exitSaying(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(status)
}
