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
/// program, create, change or remove a file, read outside the given paths, signal, re-limit or
/// reschedule another process, or gain privileges. Four layers, each with its own job:
/// - identity and capabilities: no capability at all (bounding, ambient, effective, permitted,
///   inheritable), and when the daemon runs as root, an unprivileged user (`nobody` unless
///   configured) instead of root.
/// - `PR_SET_NO_NEW_PRIVS`: no privileges through exec, and what seccomp and Landlock require.
/// - a seccomp filter (libseccomp) on every thread: the forbidden calls fail with `EPERM`.
/// - Landlock: file access beneath `readablePaths` only, and read-only there; no TCP bind or
///   connect (ABI 4); signals and abstract Unix sockets only within the template and its workers
///   (ABI 6). Where the kernel has no Landlock, or an older ABI, the report says which, and the
///   seccomp filter still refuses every write, socket and signal to another process.
///
/// The documentation of the engine worker sandbox lists every rule, its mechanism and its test.
public enum EngineSandbox {
    /// What was enforced.
    public struct Report: Sendable, Hashable, CustomStringConvertible {
        /// The user the process became (the daemon runs as root); nil when it kept its own.
        public var user: String?
        /// No capability is held (effective, permitted, inheritable, ambient).
        public var noCapabilities: Bool = false
        /// The bounding set is empty.
        public var boundingSetEmpty: Bool = false
        /// `PR_SET_NO_NEW_PRIVS` is set.
        public var noNewPrivileges: Bool
        /// The seccomp filter is loaded.
        public var seccomp: Bool
        /// The Landlock ABI the ruleset was built for; nil when the kernel offers none.
        public var landlockABI: Int?
        /// Why Landlock is not in force, when it is not.
        public var landlockUnavailable: String?

        /// Landlock scopes signals and abstract Unix sockets to the template and its workers.
        public var landlockScoped: Bool { (landlockABI ?? 0) >= Landlock.scopingABI }

        public var description: String {
            var parts: [String] = []
            if let user { parts.append("user \(user)") }
            if noCapabilities {
                parts.append(boundingSetEmpty ? "no capabilities" : "no capabilities (bounding set kept)")
            }
            if noNewPrivileges { parts.append("no_new_privs") }
            if seccomp { parts.append("seccomp") }
            if let landlockABI {
                parts.append(
                    landlockScoped
                        ? "landlock ABI \(landlockABI) (signals and abstract sockets scoped)"
                        : "landlock ABI \(landlockABI) (no signal scoping before ABI \(Landlock.scopingABI))")
            } else if let landlockUnavailable {
                parts.append("no landlock (\(landlockUnavailable))")
            }
            return parts.joined(separator: ", ")
        }
    }

    /// The user a worker runs as when the daemon runs as root, unless configured otherwise.
    public static let defaultUser = "nobody"

    /// Which layers to enter. All of them, unless the environment variable `SPEAKD_ENGINE_SANDBOX`
    /// is `without-seccomp`: the system-call filter is then left out, for an emulator that cannot
    /// filter system calls (qemu-user, where the arm64 package is tested, answers every seccomp
    /// request with an error, and a filter would apply to the emulator itself). The report, and so
    /// `/healthz`, then lacks "seccomp". The daemon and `speak` pass their environment to the
    /// worker template, which reads it.
    public enum Layers: String, Sendable, Hashable {
        case all
        case withoutSeccomp = "without-seccomp"

        /// The environment variable that chooses.
        public static let variable = "SPEAKD_ENGINE_SANDBOX"

        /// The layers `value` (the variable's value; nil when unset) asks for.
        /// - Throws: `SandboxError` naming the variable and the values it takes.
        public init(environment value: String?) throws(SandboxError) {
            guard let value, !value.isEmpty else {
                self = .all
                return
            }
            guard value == Self.withoutSeccomp.rawValue else {
                throw SandboxError(
                    description: "\(Self.variable)=\(value): the only value it takes is "
                        + "'\(Self.withoutSeccomp.rawValue)' (unset: every layer)")
            }
            self = .withoutSeccomp
        }
    }

    /// Enters the sandbox; it cannot be left. Call it before any thread but the caller's exists,
    /// since Landlock confines the calling thread and the threads it starts afterwards, and the
    /// capability sets are per thread.
    ///
    /// - Parameter readablePaths: directories (or files) the process may read beneath. They are
    ///   opened before the process changes user: the user need not be able to reach them through
    ///   their parent directories, only to read them (see `user`).
    /// - Parameter forksWorkers: for a worker template, which forks the workers: new processes
    ///   and signals to other processes stay allowed until each forked worker calls
    ///   `confineForkedWorker()`.
    /// - Parameter user: the user to become when the process runs as root.
    /// - Parameter layers: `.withoutSeccomp` leaves out the system-call filter (see `Layers`).
    /// - Throws: `SandboxError` naming the step that failed; the process must then not go on.
    @discardableResult
    public static func enter(
        readablePaths: [String], forksWorkers: Bool = false, user: String = defaultUser, layers: Layers = .all
    ) throws(SandboxError) -> Report {
        // libdispatch reads its worker threads' state in /proc/TID/stat to size its thread pool,
        // and crashes the process when it cannot: /proc stays readable (not writable).
        let landlock = try Landlock.prepare(readablePaths: readablePaths + ["/proc"])
        let privileges: Privileges.Outcome
        do {
            privileges = try Privileges.drop(becoming: user)
        } catch {
            if case .ruleset(let descriptor, _) = landlock { close(descriptor) }
            throw error
        }
        var report = Report(
            user: privileges.user, noCapabilities: true, boundingSetEmpty: privileges.boundingSetEmpty,
            noNewPrivileges: false, seccomp: false)
        guard speakd_set_no_new_privs() == 0 else { throw .system("prctl(PR_SET_NO_NEW_PRIVS)", errno) }
        report.noNewPrivileges = true
        if case .unavailable(let reason) = landlock { report.landlockUnavailable = reason }
        report.landlockABI = try Landlock.restrict(landlock)
        guard layers == .all else { return report }
        try SeccompFilter.load(process: !forksWorkers)
        report.seccomp = true
        return report
    }

    /// The number of the system call `name` on this architecture, as the filter resolves it; nil
    /// when the architecture has no such call. For the sandbox probe, which makes each call
    /// directly.
    public static func systemCallNumber(_ name: String) -> Int? {
        let number = seccomp_syscall_resolve_name(name)
        return number == __NR_SCMP_ERROR ? nil : Int(number)
    }

    /// In a worker forked by a template inside the sandbox: adds what the template's filter left
    /// out, so the worker can start no process, signal none but itself and use no socket.
    public static func confineForkedWorker(layers: Layers = .all) throws(SandboxError) {
        guard layers == .all else { return }
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
