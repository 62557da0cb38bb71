import CSeccomp
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The engine worker's system-call filter: everything a Swift program with threads needs stays
/// allowed; what would let a hijacked worker reach the rest of the kiosk fails with `EPERM`.
///
/// A deny list, not an allow list: the Swift runtime, Foundation and glibc use system calls that
/// vary by version, and a worker killed by a call missing from an allow list would fail every
/// announcement. What a compromised worker could use is what is listed here.
enum SeccompFilter {
    /// Calls that fail outright.
    static let denied = [
        // Network, and new Unix sockets.
        "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
        // Other programs and processes (fork and vfork: `processCalls`).
        "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "tkill",
        "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
        // Creating, changing and removing files (opening for write is filtered below).
        "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir",
        "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate",
        "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes", "utimensat",
        "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "memfd_create",
        "name_to_handle_at", "open_by_handle_at",
        // The system itself.
        "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open",
        "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
        "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
        "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
        "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "capset",
        "fanotify_init", "inotify_init", "inotify_init1", "quotactl", "syslog", "vhangup", "mbind",
        "move_pages", "migrate_pages", "lookup_dcookie",
    ]

    /// Loads the filter: everything `denied`, writing opens, and with `process`, new processes
    /// and signals to other processes (`processCalls`).
    ///
    /// A worker template loads it without `process`: it forks the workers, and each of them then
    /// loads `processCalls` alone on top (filters stack, the strictest answer wins). The template's
    /// own filter cannot hold the signal rule: it names the template's process id, and in a
    /// forked worker it would refuse the worker's signals to itself (abort()).
    static func load(process: Bool) throws(SandboxError) {
        try withFilter { context, deny throws(SandboxError) in
            for name in denied {
                let number = seccomp_syscall_resolve_name(name)
                // A call this architecture does not have needs no rule.
                guard number != __NR_SCMP_ERROR else { continue }
                try add(context, deny, number, [], name)
            }
            // clone3 passes its flags in memory a filter cannot read: ENOSYS makes glibc use clone.
            try add(context, speakd_scmp_act_errno(UInt32(ENOSYS)), "clone3", [])
            // openat2 passes its flags in memory too; glibc's open and fopen do not use it.
            try add(context, speakd_scmp_act_errno(UInt32(ENOSYS)), "openat2", [])

            // Opening for reading is allowed; any flag that writes or creates is not.
            let writing = [O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND].map { UInt64($0) }
            for flag in writing {
                try add(context, deny, "openat", [compare(2, SCMP_CMP_MASKED_EQ, flag, flag)])
                try add(context, deny, "open", [compare(1, SCMP_CMP_MASKED_EQ, flag, flag)])
            }
            if process { try addProcessRules(context, deny) }
        }
    }

    /// Loads a filter of `processCalls` only, on top of the template's.
    static func loadProcessCalls() throws(SandboxError) {
        try withFilter { context, deny throws(SandboxError) in try addProcessRules(context, deny) }
    }

    /// No new process (threads stay allowed), and signals only to itself.
    private static func addProcessRules(_ context: scmp_filter_ctx, _ deny: UInt32) throws(SandboxError) {
        try add(context, deny, "fork", [])
        try add(context, deny, "vfork", [])
        // Threads are clones with CLONE_THREAD; a clone without it is a new process.
        try add(context, deny, "clone", [compare(0, SCMP_CMP_MASKED_EQ, UInt64(CLONE_THREAD), 0)])
        // Signals only to itself (abort() raises SIGABRT with tgkill on its own process).
        let own = UInt64(getpid())
        try add(context, deny, "kill", [compare(0, SCMP_CMP_NE, own, 0)])
        try add(context, deny, "tgkill", [compare(0, SCMP_CMP_NE, own, 0)])
    }

    private static func withFilter(
        _ rules: (scmp_filter_ctx, UInt32) throws(SandboxError) -> Void
    ) throws(SandboxError) {
        guard let context = seccomp_init(SCMP_ACT_ALLOW) else { throw SandboxError(description: "seccomp_init failed") }
        defer { seccomp_release(context) }
        // Every thread of the process, not only the caller.
        guard seccomp_attr_set(context, SCMP_FLTATR_CTL_TSYNC, 1) == 0 else {
            throw SandboxError(description: "seccomp cannot filter every thread (SCMP_FLTATR_CTL_TSYNC)")
        }
        try rules(context, speakd_scmp_act_errno(UInt32(EPERM)))
        let status = seccomp_load(context)
        guard status == 0 else { throw .system("seccomp_load", -status) }
    }

    private static func compare(_ argument: UInt32, _ operation: scmp_compare, _ a: UInt64, _ b: UInt64)
        -> scmp_arg_cmp
    {
        scmp_arg_cmp(arg: argument, op: operation, datum_a: a, datum_b: b)
    }

    private static func add(
        _ context: scmp_filter_ctx, _ action: UInt32, _ name: String, _ comparisons: [scmp_arg_cmp]
    ) throws(SandboxError) {
        let number = seccomp_syscall_resolve_name(name)
        guard number != __NR_SCMP_ERROR else { return }
        try add(context, action, number, comparisons, name)
    }

    private static func add(
        _ context: scmp_filter_ctx, _ action: UInt32, _ number: Int32, _ comparisons: [scmp_arg_cmp], _ name: String
    ) throws(SandboxError) {
        let status = comparisons.withUnsafeBufferPointer { buffer in
            seccomp_rule_add_array(context, action, number, UInt32(buffer.count), buffer.baseAddress)
        }
        guard status == 0 else { throw .system("seccomp rule for \(name)", -status) }
    }
}
