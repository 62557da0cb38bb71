import Foundation
import SpeakTestSupport

/// An idle speakd: what it costs when nobody speaks.
///
/// Starts a private PulseAudio server with a null sink and the built `speakd` on it with
/// `--engine-workers N` (default 2), lets it settle, and then, with no request:
///
/// - idle memory: the PSS of the daemon, its worker template and each worker
///   (`/proc/PID/smaps_rollup`), their sum, the sum by mapping (`/proc/PID/smaps`: the
///   daemon's binary, each library, heap, stacks), largest first, and, run as root, the physical
///   pages of the tree counted once: its PSS on a machine where nothing else maps its libraries;
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
        var alones: [Int] = []
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
            if let alone = Self.distinctPages(processes) {
                print(
                    "run \(run): the tree's own pages (its PSS with nothing else running) \(alone) KiB"
                        + " (\(Self.mib(alone)) MiB)")
                alones.append(alone)
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
            let alone = alones.isEmpty ? "" : ", own pages \(Self.mib(alones.min()!))–\(Self.mib(alones.max()!)) MiB"
            print(
                "\(runs) runs: PSS \(Self.mib(sums.min()!))–\(Self.mib(sums.max()!)) MiB\(alone), wake-ups "
                    + String(format: "%.2f–%.2f per second", wakeRates.min()!, wakeRates.max()!))
        }
        await server.stop()
    }

    /// The physical pages `processes` map, each counted once, in KiB: what their PSS sums to when
    /// nothing else maps the same libraries. PSS splits a shared page among every process that
    /// maps it, so the sum read beside other Swift programs (a build, a test run, this benchmark)
    /// is lower, by up to several MiB; this figure is not. Needs page frame numbers from
    /// `/proc/PID/pagemap`, which only root reads; nil otherwise.
    static func distinctPages(_ processes: [pid_t]) -> Int? {
        var frames = Set<UInt64>()
        for pid in processes {
            guard let maps = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8),
                let pagemap = FileHandle(forReadingAtPath: "/proc/\(pid)/pagemap")
            else { continue }
            defer { try? pagemap.close() }
            for line in maps.split(separator: "\n") where !line.hasSuffix("[vsyscall]") {
                let range = line.prefix { $0 != " " }.split(separator: "-").compactMap { UInt64($0, radix: 16) }
                guard range.count == 2 else { continue }
                let pages = Int((range[1] - range[0]) / 4096)
                guard (try? pagemap.seek(toOffset: range[0] / 4096 * 8)) != nil,
                    let data = try? pagemap.read(upToCount: pages * 8), data.count == pages * 8
                else { continue }
                data.withUnsafeBytes { bytes in
                    for index in 0..<pages {
                        let entry = bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)
                        // Present, with its frame number (bits 0-54); 0 when the reader is not root.
                        let frame = entry & (1 << 55 - 1)
                        if entry >> 63 == 1, frame != 0 { frames.insert(frame) }
                    }
                }
            }
        }
        return frames.isEmpty ? nil : frames.count * 4
    }

    /// `Pss:` of `/proc/PID/smaps_rollup` in KiB; 0 when the process is gone.
    static func pss(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        return kib(text.split(separator: "\n").first { $0.hasPrefix("Pss:") })
    }

    /// PSS in KiB by what is mapped: a file's path (its writable part marked), `[heap]`,
    /// `[stack]`, or `[anon]` for anonymous mappings (thread stacks, malloc arenas, runtime data).
    static func pssByMapping(_ pid: pid_t) -> [String: Int] {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/smaps", encoding: .utf8)) ?? ""
        var sums: [String: Int] = [:]
        var current = "[anon]"
        for line in text.split(separator: "\n") {
            if line.hasPrefix("Pss:") {
                sums[current, default: 0] += kib(line)
            } else if let first = line.first, first.isHexDigit, line.contains("-") {
                let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
                let path = fields.count > 5 ? fields[5].trimmingCharacters(in: .whitespaces) : "[anon]"
                let writable = fields.count > 1 && fields[1].contains("w") && path.hasPrefix("/")
                current = path + (writable ? " (written)" : "")
            }
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
