import CSeccomp

#if canImport(Glibc)
import Glibc
#endif

/// Capabilities and identity: a worker holds no capability, and does not run as root.
enum Privileges {
    struct Outcome {
        /// The user the process became; nil when it kept its own (it was not root).
        var user: String?
        /// The bounding set is empty (it could be emptied: the process had CAP_SETPCAP, or it
        /// was empty already).
        var boundingSetEmpty: Bool
    }

    /// Empties the bounding and ambient sets where it may, and when the process runs as root,
    /// becomes `user` (its uid and primary gid, no supplementary groups); then empties the
    /// effective, permitted and inheritable sets and checks that nothing is left.
    ///
    /// Call it with one thread: the bounding set and `capset` are per thread (glibc's setresuid
    /// and setresgid change every thread).
    ///
    /// - Throws: `SandboxError` when `user` does not exist or is root, or a step fails.
    static func drop(becoming user: String) throws(SandboxError) -> Outcome {
        // The bounding set first: emptying it needs CAP_SETPCAP, which leaving root takes away.
        var boundingSetEmpty = true
        var capability: Int32 = 0
        while case let bounded = speakd_capability_bounded(capability), bounded >= 0 {
            if bounded == 1 && speakd_drop_bounded_capability(capability) != 0 { boundingSetEmpty = false }
            capability += 1
        }
        // EINVAL on kernels before 4.3, which have no ambient set.
        if speakd_clear_ambient_capabilities() != 0 && errno != EINVAL {
            throw .system("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", errno)
        }
        var became: String?
        if getuid() == 0 || geteuid() == 0 {
            guard let entry = getpwnam(user) else {
                throw SandboxError(description: "the engine worker user '\(user)' does not exist")
            }
            let uid = entry.pointee.pw_uid
            let gid = entry.pointee.pw_gid
            guard uid != 0 else { throw SandboxError(description: "the engine worker user '\(user)' is root") }
            guard setgroups(0, nil) == 0 else { throw .system("setgroups", errno) }
            guard setresgid(gid, gid, gid) == 0 else { throw .system("setresgid \(gid)", errno) }
            guard setresuid(uid, uid, uid) == 0 else { throw .system("setresuid \(uid)", errno) }
            became = user
        }
        guard speakd_clear_capabilities() == 0 else { throw .system("capset", errno) }
        guard speakd_holds_capabilities() == 0 else {
            throw SandboxError(description: "capabilities remain after capset")
        }
        return Outcome(user: became, boundingSetEmpty: boundingSetEmpty)
    }
}
