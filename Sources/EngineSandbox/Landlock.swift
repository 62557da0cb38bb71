import CSeccomp
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// File-system confinement with Landlock: read-only beneath the given paths, nothing elsewhere;
/// on kernels with ABI 4, no TCP bind or connect; with ABI 6, signals and abstract Unix sockets
/// reach only processes of the same domain (the template and its workers).
enum Landlock {
    /// A ruleset built and not yet in force: built while the process can still open the paths
    /// (before it leaves root for the worker user), enforced afterwards.
    enum Prepared {
        case ruleset(descriptor: Int32, abi: Int)
        case unavailable(String)
    }

    /// Rights by the ABI that introduced them; a ruleset may only handle what the kernel knows.
    /// The numbers are the kernel's (`linux/landlock.h`); Debian 12's header stops at ABI 2.
    private static func handledRights(abi: Int) -> UInt64 {
        var rights: UInt64 = (1 << 13) - 1  // ABI 1: execute … make_sym
        if abi >= 2 { rights |= 1 << 13 }  // refer
        if abi >= 3 { rights |= 1 << 14 }  // truncate
        if abi >= 5 { rights |= 1 << 15 }  // ioctl on devices
        return rights
    }

    /// ABI 4: binding and connecting TCP sockets, handled with no rule granting them.
    private static func handledNetwork(abi: Int) -> UInt64 {
        abi >= 4 ? 1 << 0 | 1 << 1 : 0
    }

    /// The ABI that scopes signals and abstract Unix sockets to the domain.
    static let scopingABI = 6

    /// ABI 6: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET and LANDLOCK_SCOPE_SIGNAL.
    private static func scopes(abi: Int) -> UInt64 {
        abi >= scopingABI ? 1 << 0 | 1 << 1 : 0
    }

    private static let readRights = UInt64(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

    /// Builds the ruleset granting reads beneath `readablePaths`.
    static func prepare(readablePaths: [String]) throws(SandboxError) -> Prepared {
        let abi = Int(speakd_landlock_abi())
        guard abi >= 1 else {
            let code = errno
            return .unavailable(code == ENOSYS ? "not in this kernel" : "disabled: \(String(cString: strerror(code)))")
        }
        let ruleset = speakd_landlock_create_scoped_ruleset(
            handledRights(abi: abi), handledNetwork(abi: abi), scopes(abi: abi))
        guard ruleset >= 0 else { throw .system("landlock_create_ruleset", errno) }
        for path in readablePaths {
            let descriptor = open(path, O_PATH | O_CLOEXEC)
            guard descriptor >= 0 else {
                let code = errno
                close(ruleset)
                throw .system("open \(path) for Landlock", code)
            }
            defer { close(descriptor) }
            var status = stat()
            fstat(descriptor, &status)
            // A rule on a file may only grant file rights.
            let isDirectory = status.st_mode & S_IFMT == S_IFDIR
            let allowed = isDirectory ? readRights : UInt64(LANDLOCK_ACCESS_FS_READ_FILE)
            guard speakd_landlock_allow_beneath(ruleset, descriptor, allowed) == 0 else {
                let code = errno
                close(ruleset)
                throw .system("landlock_add_rule \(path)", code)
            }
        }
        return .ruleset(descriptor: ruleset, abi: abi)
    }

    /// Puts a prepared ruleset in force on the calling process; returns its ABI, nil when there
    /// is none.
    static func restrict(_ prepared: Prepared) throws(SandboxError) -> Int? {
        guard case .ruleset(let ruleset, let abi) = prepared else { return nil }
        defer { close(ruleset) }
        guard speakd_landlock_restrict_self(ruleset) == 0 else { throw .system("landlock_restrict_self", errno) }
        return abi
    }
}
