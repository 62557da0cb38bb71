import CSeccomp
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Confines the current process to what an engine worker needs: reading espeak-ng's data and
/// voices, and using the pipes it already has.
///
/// libespeak-ng has memory-safety bugs on crafted text; a worker that enters the sandbox before it
/// reads any job cannot be turned into a way into the kiosk: it cannot open a socket, start a
/// program, create, change or remove a file, read outside the given paths, signal another process
/// or gain privileges. Three layers, each with its own job:
/// - `PR_SET_NO_NEW_PRIVS`: no privileges through exec, and what seccomp and Landlock require.
/// - a seccomp filter (libseccomp) on every thread: the forbidden calls fail with `EPERM`.
/// - Landlock: file access beneath `readablePaths` only, and read-only there; where the kernel has
///   no Landlock the report says so and the seccomp filter still refuses every write.
public enum EngineSandbox {
    /// What was enforced.
    public struct Report: Sendable, Hashable, CustomStringConvertible {
        /// `PR_SET_NO_NEW_PRIVS` is set.
        public var noNewPrivileges: Bool
        /// The seccomp filter is loaded.
        public var seccomp: Bool
        /// The Landlock ABI the ruleset was built for; nil when the kernel offers none.
        public var landlockABI: Int?
        /// Why Landlock is not in force, when it is not.
        public var landlockUnavailable: String?

        public var description: String {
            var parts: [String] = []
            if noNewPrivileges { parts.append("no_new_privs") }
            if seccomp { parts.append("seccomp") }
            if let landlockABI {
                parts.append("landlock ABI \(landlockABI)")
            } else if let landlockUnavailable {
                parts.append("no landlock (\(landlockUnavailable))")
            }
            return parts.joined(separator: ", ")
        }
    }

    /// Enters the sandbox; it cannot be left. Call it before any thread but the caller's exists,
    /// since Landlock confines the calling thread and the threads it starts afterwards.
    ///
    /// - Parameter readablePaths: directories (or files) the process may read beneath.
    /// - Throws: `SandboxError` naming the step that failed; the process must then not go on.
    /// - Parameter forksWorkers: for a worker template, which forks the workers: new processes
    ///   and signals to other processes stay allowed until each forked worker calls
    ///   `confineForkedWorker()`.
    @discardableResult
    public static func enter(readablePaths: [String], forksWorkers: Bool = false) throws(SandboxError) -> Report {
        guard speakd_set_no_new_privs() == 0 else { throw .system("prctl(PR_SET_NO_NEW_PRIVS)", errno) }
        var report = Report(noNewPrivileges: true, seccomp: false)
        // libdispatch reads its worker threads' state in /proc/TID/stat to size its thread pool,
        // and crashes the process when it cannot: /proc stays readable (not writable).
        switch try Landlock.restrict(readablePaths: readablePaths + ["/proc"]) {
        case .enforced(let abi): report.landlockABI = abi
        case .unavailable(let reason): report.landlockUnavailable = reason
        }
        try SeccompFilter.load(process: !forksWorkers)
        report.seccomp = true
        return report
    }

    /// In a worker forked by a template inside the sandbox: adds what the template's filter left
    /// out, so the worker can start no process and signal none but itself.
    public static func confineForkedWorker() throws(SandboxError) {
        try SeccompFilter.loadProcessCalls()
    }
}

/// Entering the sandbox failed.
public struct SandboxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The step that failed and the system's reason.
    public let description: String

    static func system(_ step: String, _ code: Int32) -> SandboxError {
        SandboxError(description: "\(step): \(String(cString: strerror(code)))")
    }
}
