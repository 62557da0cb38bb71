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
        "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "kcmp", "process_madvise", "process_mrelease",
        "ioprio_set",
        // Sockets it holds (its own control socket, for a template): no options, no shutdown.
        "setsockopt", "shutdown",
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

    /// `fcntl` commands that make the kernel signal a process of the caller's choosing (SIGIO or
    /// another, on I/O), or hold a lease whose break signals.
    static let signallingFcntls: [Int32] = [
        8 /* F_SETOWN */, 10 /* F_SETSIG */, 15 /* F_SETOWN_EX */, 1024 /* F_SETLEASE */,
    ]

    /// `ioctl` requests of the same kind (FIOSETOWN, SIOCSPGRP), and TIOCSTI, which types into a
    /// terminal.
    static let signallingIoctls: [UInt64] = [0x8901, 0x8902, 0x5412]

    /// Calls that change another process's scheduling or resource limits: refused unless their pid
    /// is 0 (the caller).
    static let schedulingOthers = [
        "sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity", "prlimit64",
    ]

    /// Loads the filter: everything `denied`, writing opens, the calls that reach other processes
    /// whatever the caller's process id (`addOtherProcessRules`), and with `process`, new
    /// processes and signals to any process but itself (`processCalls`).
    ///
    /// A worker template loads it without `process`: it forks the workers, and each of them then
    /// loads `processCalls` alone on top (filters stack, the strictest answer wins). The template's
    /// own filter cannot hold the signal rule: it names the template's process id, and in a
    /// forked worker it would refuse the worker's signals to itself (abort()). It refuses signals
    /// to its parent (the daemon), to process groups and to every process (-1) instead; on a
    /// kernel with Landlock ABI 6 the template's domain scopes its signals to itself and its
    /// workers besides.
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
            try addOtherProcessRules(context, deny)
            if process { try addProcessRules(context, deny) }
        }
    }

    /// What reaches another process whoever the caller is, so the template's filter holds it too:
    /// scheduling and resource limits of any pid but 0, signal delivery set up on a descriptor,
    /// and signals to the parent (the daemon), to a process group or to every process.
    private static func addOtherProcessRules(_ context: scmp_filter_ctx, _ deny: UInt32) throws(SandboxError) {
        // pid_t arguments arrive sign-extended or not: only their low 32 bits are compared.
        let low: UInt64 = 0xffff_ffff
        for name in schedulingOthers {
            try denyUnless(context, deny, name, argument: 0, is: 0)
        }
        // setpriority(which, who, prio): only PRIO_PROCESS (0) of the caller (0); a process group
        // or a user would reach the daemon.
        try denyUnless(context, deny, "setpriority", argument: 0, is: 0)
        try denyUnless(context, deny, "setpriority", argument: 1, is: 0)
        for command in signallingFcntls {
            try add(context, deny, "fcntl", [compare(1, SCMP_CMP_MASKED_EQ, low, UInt64(command))])
        }
        for request in signallingIoctls {
            try add(context, deny, "ioctl", [compare(1, SCMP_CMP_MASKED_EQ, low, request)])
        }
        let parent = UInt64(UInt32(bitPattern: getppid()))
        let negative: UInt64 = 0x8000_0000
        for name in ["kill", "rt_sigqueueinfo"] {
            try add(context, deny, name, [compare(0, SCMP_CMP_MASKED_EQ, low, 0)])
            try add(context, deny, name, [compare(0, SCMP_CMP_MASKED_EQ, negative, negative)])
            try add(context, deny, name, [compare(0, SCMP_CMP_MASKED_EQ, low, parent)])
        }
        for name in ["tgkill", "rt_tgsigqueueinfo"] {
            try add(context, deny, name, [compare(0, SCMP_CMP_MASKED_EQ, low, parent)])
        }
    }

    /// Loads a filter of `processCalls` only, on top of the template's.
    static func loadProcessCalls() throws(SandboxError) {
        try withFilter { context, deny throws(SandboxError) in try addProcessRules(context, deny) }
    }

    /// No new process (threads stay allowed), signals only to itself, and no messages on sockets
    /// (a worker has pipes only).
    private static func addProcessRules(_ context: scmp_filter_ctx, _ deny: UInt32) throws(SandboxError) {
        try add(context, deny, "fork", [])
        try add(context, deny, "vfork", [])
        // Threads are clones with CLONE_THREAD; a clone without it is a new process.
        try add(context, deny, "clone", [compare(0, SCMP_CMP_MASKED_EQ, UInt64(CLONE_THREAD), 0)])
        // Signals only to itself (abort() raises SIGABRT with tgkill on its own process).
        let own = UInt64(UInt32(bitPattern: getpid()))
        for name in ["kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"] {
            try denyUnless(context, deny, name, argument: 0, is: own)
        }
        for name in ["sendmsg", "sendmmsg", "sendto", "recvmsg", "recvmmsg", "recvfrom"] {
            try add(context, deny, name, [])
        }
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

    /// `action` for `name` unless its `argument` is `value` (a pid or a small constant): seccomp
    /// has no masked "not equal", so the rule is three ranges, each a rule of its own. The
    /// argument may arrive sign-extended or not; either way a value with any of its upper 32 bits
    /// set is not `value` and is refused, as is any other value below 2^32.
    private static func denyUnless(
        _ context: scmp_filter_ctx, _ action: UInt32, _ name: String, argument: UInt32, is value: UInt64
    ) throws(SandboxError) {
        try add(context, action, name, [compare(argument, SCMP_CMP_GE, 1 << 32, 0)])
        if value > 0 { try add(context, action, name, [compare(argument, SCMP_CMP_LT, value, 0)]) }
        try add(context, action, name, [compare(argument, SCMP_CMP_GT, value, 0)])
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
