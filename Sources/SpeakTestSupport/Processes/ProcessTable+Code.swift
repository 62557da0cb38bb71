import Foundation

extension ProcessTable {
    /// One mapping of a file's code (executable, not writable) in a process.
    public struct CodeMapping: Sendable {
        /// The file mapped.
        public var path: String
        /// The mapping's size.
        public var bytes: Int
        /// How much of it the process has mapped in (`Rss:`), in KiB.
        public var residentKiB: Int
    }

    /// Every mapping of a file's code in `pid` (the program and its shared libraries), from
    /// `/proc/PID/smaps`; empty when it is gone.
    public static func codeMappings(of pid: pid_t) -> [CodeMapping] {
        // Read to its end: /proc files report a size of 0, and a read of that size stops early.
        guard let file = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps"), let smaps = try? file.readToEnd()
        else { return [] }
        var mappings: [CodeMapping] = []
        var current: CodeMapping?
        for line in String(decoding: smaps, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if !first.hasSuffix(":"), first.contains("-") {
                // A mapping's first line: "start-end perms offset dev inode [path]".
                if let mapping = current { mappings.append(mapping) }
                current = nil
                let bounds = first.split(separator: "-").compactMap { UInt(String($0), radix: 16) }
                if fields.count >= 6, fields[1] == "r-xp", fields[5].hasPrefix("/"), bounds.count == 2 {
                    current = CodeMapping(path: String(fields[5]), bytes: Int(bounds[1] - bounds[0]), residentKiB: 0)
                }
            } else if first == "Rss:", fields.count >= 2, let kib = Int(fields[1]) {
                current?.residentKiB = kib
            }
        }
        if let mapping = current { mappings.append(mapping) }
        return mappings
    }
}
