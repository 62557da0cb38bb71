import Foundation

extension ProcessTable {
    /// One thread's voluntary context switches: each is the thread going to sleep (a wait, a
    /// poll, a timer), so each is a wake-up after it. Involuntary ones are not counted: they are
    /// a running thread preempted, which a machine busy with something else makes many of, and no
    /// wake-up.
    public struct ThreadSwitches: Sendable, Hashable {
        /// The process the thread belongs to.
        public var pid: pid_t
        /// The thread's id.
        public var tid: pid_t
        /// The process's name and the thread's (`speakd/speakd-worker-12`), as `comm` gives them.
        public var name: String
        /// `voluntary_ctxt_switches`.
        public var switches: Int
    }

    /// The context switches of every thread of `root` and of all its descendants, from
    /// `/proc/PID/task/TID/status`: nothing else on the machine is counted.
    public static func threadSwitches(of root: pid_t) -> [ThreadSwitches] {
        tree(of: root).flatMap { pid -> [ThreadSwitches] in
            let process = comm("/proc/\(pid)/comm")
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.compactMap { task -> ThreadSwitches? in
                guard let tid = pid_t(task),
                    let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
                else { return nil }
                var switches = 0
                for line in status.split(separator: "\n") {
                    guard line.hasPrefix("voluntary_ctxt_switches:"),
                        let value = line.split(whereSeparator: \.isWhitespace).last.flatMap({ Int($0) })
                    else { continue }
                    switches += value
                }
                return ThreadSwitches(
                    pid: pid, tid: tid, name: "\(process)/\(comm("/proc/\(pid)/task/\(task)/comm"))",
                    switches: switches)
            }
        }
    }

    /// The wake-ups of each thread of `root`'s tree between two readings of `threadSwitches`,
    /// most first; a thread born in between counts from zero, one that ended is not counted.
    public static func wakeups(from before: [ThreadSwitches], to after: [ThreadSwitches]) -> [ThreadSwitches] {
        let earlier = Dictionary(before.map { ($0.tid, $0.switches) }, uniquingKeysWith: { first, _ in first })
        return after.map { thread in
            var woken = thread
            woken.switches = thread.switches - (earlier[thread.tid] ?? 0)
            return woken
        }
        .filter { $0.switches > 0 }
        .sorted { $0.switches > $1.switches }
    }

    private static func comm(_ path: String) -> String {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
