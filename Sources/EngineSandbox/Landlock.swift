import CSeccomp
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// File-system confinement with Landlock: read-only beneath the given paths, nothing elsewhere.
enum Landlock {
    enum Outcome {
        case enforced(abi: Int)
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

    private static let readRights = UInt64(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

    static func restrict(readablePaths: [String]) throws(SandboxError) -> Outcome {
        let abi = Int(speakd_landlock_abi())
        guard abi >= 1 else {
            let code = errno
            return .unavailable(code == ENOSYS ? "not in this kernel" : "disabled: \(String(cString: strerror(code)))")
        }
        let ruleset = speakd_landlock_create_ruleset(handledRights(abi: abi))
        guard ruleset >= 0 else { throw .system("landlock_create_ruleset", errno) }
        defer { close(ruleset) }
        for path in readablePaths {
            let descriptor = open(path, O_PATH | O_CLOEXEC)
            guard descriptor >= 0 else { throw .system("open \(path) for Landlock", errno) }
            defer { close(descriptor) }
            var status = stat()
            fstat(descriptor, &status)
            // A rule on a file may only grant file rights.
            let isDirectory = status.st_mode & S_IFMT == S_IFDIR
            let allowed = isDirectory ? readRights : UInt64(LANDLOCK_ACCESS_FS_READ_FILE)
            guard speakd_landlock_allow_beneath(ruleset, descriptor, allowed) == 0 else {
                throw .system("landlock_add_rule \(path)", errno)
            }
        }
        guard speakd_landlock_restrict_self(ruleset) == 0 else { throw .system("landlock_restrict_self", errno) }
        return .enforced(abi: abi)
    }
}
