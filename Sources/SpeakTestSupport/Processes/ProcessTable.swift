import Foundation

/// What `/proc` says about a process and its children: for tests and benchmarks that find the
/// daemon's engine workers, see whether one is rendering, and add up CPU time and memory.
public enum ProcessTable {
    /// The direct children of `pid` (`/proc/PID/task/*/children`); empty when it is gone.
    public static func children(of pid: pid_t) -> [pid_t] {
        tasks(of: pid).flatMap { task -> [pid_t] in
            let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return children.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    /// `root` and all its descendants, `root` first.
    public static func tree(of root: pid_t) -> [pid_t] {
        var pending = [root]
        var seen: [pid_t] = []
        while let pid = pending.popLast() {
            guard !seen.contains(pid) else { continue }
            seen.append(pid)
            pending += children(of: pid)
        }
        return seen
    }

    /// Whether any thread of `pid` is on a CPU or runnable (`R` in its `stat`). The process's own
    /// `stat` shows only its main thread, and espeak-ng renders on another.
    public static func isRunning(_ pid: pid_t) -> Bool {
        tasks(of: pid).contains { task in
            statFields("/proc/\(pid)/task/\(task)/stat")?.first == "R"
        }
    }

    /// Whether `pid` has ended: gone, or a zombie its parent has not reaped (`Z` in its `stat`),
    /// which has closed its descriptors.
    public static func hasEnded(_ pid: pid_t) -> Bool {
        guard let state = statFields("/proc/\(pid)/stat")?.first else { return true }
        return state == "Z" || state == "X"
    }

    /// User plus system CPU seconds `pid` has used (its own threads, not its children); 0 when gone.
    public static func cpuSeconds(_ pid: pid_t) -> Double {
        // After the command name, state is the first field; utime and stime the 12th and 13th.
        guard let fields = statFields("/proc/\(pid)/stat"), fields.count > 12,
            let user = Double(fields[11]), let system = Double(fields[12])
        else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The fields of `/proc/PID/status`, each name with its first value ("Uid" → the real uid,
    /// "CapEff" → the effective set in hex); empty when it is gone.
    public static func status(of pid: pid_t) -> [String: String] {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let value = parts[1].split(whereSeparator: \.isWhitespace).first else { continue }
            fields[String(parts[0])] = String(value)
        }
        return fields
    }

    /// Where each of `pid`'s descriptors leads (`/proc/PID/fd`: "socket:[123]", "pipe:[45]",
    /// "anon_inode:[eventpoll]", a path), by number.
    public static func descriptors(of pid: pid_t) -> [Int32: String] {
        let directory = "/proc/\(pid)/fd"
        var targets: [Int32: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            guard let number = Int32(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(name)")
            else { continue }
            targets[number] = target
        }
        return targets
    }

    private static func tasks(of pid: pid_t) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    }

    /// The fields of a `stat` file after the command name, which may itself hold spaces.
    private static func statFields(_ path: String) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
}
