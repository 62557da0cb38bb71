import Foundation

extension ProcessTable {
    /// One mapping of a process, as `/proc/PID/smaps` lists it.
    public struct Mapping: Sendable {
        /// The file mapped, or what the kernel names it (`[heap]`, `[stack]`); empty for an
        /// anonymous mapping.
        public var path: String
        /// As smaps gives them: `r-xp`, `rw-p`, …
        public var permissions: String
        /// The mapping's size.
        public var bytes: Int
        /// How much of it the process has mapped in (`Rss:`), in KiB.
        public var residentKiB: Int
        /// Its proportional share (`Pss:`), in KiB.
        public var pssKiB: Int

        /// A file's code: executable and not writable (the program and its shared libraries).
        public var isCode: Bool { permissions == "r-xp" && path.hasPrefix("/") }
    }

    /// Every mapping of `pid`, from `/proc/PID/smaps`; empty when it is gone.
    public static func mappings(of pid: pid_t) -> [Mapping] {
        var mappings: [Mapping] = []
        for line in (procFile("/proc/\(pid)/smaps") ?? "").split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if !first.hasSuffix(":"), first.contains("-") {
                // A mapping's first line: "start-end perms offset dev inode [path]".
                let bounds = first.split(separator: "-").compactMap { UInt(String($0), radix: 16) }
                guard bounds.count == 2, fields.count >= 5 else { continue }
                mappings.append(
                    Mapping(
                        path: fields.count > 5 ? fields[5].trimmingCharacters(in: .whitespaces) : "",
                        permissions: String(fields[1]), bytes: Int(bounds[1] - bounds[0]), residentKiB: 0, pssKiB: 0))
            } else if fields.count >= 2, let kib = Int(fields[1]), !mappings.isEmpty {
                if first == "Rss:" { mappings[mappings.count - 1].residentKiB = kib }
                if first == "Pss:" { mappings[mappings.count - 1].pssKiB = kib }
            }
        }
        return mappings
    }

    /// Every mapping of a file's code in `pid` (`Mapping.isCode`); empty when it is gone.
    public static func codeMappings(of pid: pid_t) -> [Mapping] {
        mappings(of: pid).filter(\.isCode)
    }

    /// A file of /proc, read to its end with plain reads (its size shows as 0, and it is made as
    /// it is read); nil when it cannot be opened.
    public static func procFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
