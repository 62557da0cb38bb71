"""Confines the Piper worker (speakd-piper-worker.py) so that it may do no more than an espeak-ng
worker (Sources/EngineSandbox): the same seccomp rules, and reads confined by Landlock.

Two steps; what each enforces is in the description `Sandbox.confine` returns, and each fails the
start when the kernel offers it but it cannot be applied.

`Sandbox(readable, user)`, at the worker's start, before any thread exists: Landlock holds for
the calling thread and the threads it starts afterwards, not for threads already running, and
onnxruntime starts its threads when the voice is loaded.
- PR_SET_NO_NEW_PRIVS.
- Landlock (any ABI): reading only beneath `readable` (`worker_paths`: the venv, the Python it
  was made from, the worker's directory, the voice's directories, the system libraries and
  /etc/ld.so.cache, the worker's own /proc/PID, /proc/cpuinfo and /sys/devices/system/cpu, which
  onnxruntime and OpenBLAS read). Nothing may be written, created, removed, renamed, truncated or
  executed anywhere; from ABI 4 no TCP bind or connect; from ABI 6 signals and abstract Unix
  sockets scoped to the worker. So the daemon's token, /etc, /home and /root are out of reach.
- The user to become is looked up now (/etc/passwd is out of reach afterwards).

`Sandbox.confine(memory_limit_mib)`, once the model is loaded and warmed:
- Started as root, it becomes `user` (speakd's --engine-worker-user) with an empty bounding set
  and no supplementary groups, so no capability stays with it.
- RLIMIT_AS, when a memory limit is given.
- seccomp (libseccomp, on every thread: onnxruntime's started before it too): the rules of
  SeccompFilter.swift for a worker, each answering EPERM. No socket made, connected, sent on or
  controlled; no io_uring; no program, no new process (threads stay allowed: a clone with
  CLONE_THREAD), no namespace; no file written, created or removed, no memfd; no signal but to
  itself; no resource limit or scheduling of another process; no ptrace, keyrings, bpf, mounts,
  modules. clone3 and openat2 answer ENOSYS, so that glibc uses clone and openat, whose
  arguments the filter reads.
"""

import ctypes
import errno
import os
import resource
import stat
import sys

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_READ_FILE = 1 << 2
_LANDLOCK_READ_DIR = 1 << 3
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24

# Beside the Python and the voice, what a worker reads: shared libraries (numpy's, onnxruntime's
# and their dependencies, found through the loader's cache), and the processor's description.
_SYSTEM_PATHS = [
    "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache", "/proc/cpuinfo", "/sys/devices/system/cpu",
]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def worker_paths(voice_files):
    """What the worker reads once confined: the venv, the Python it was made from (the standard
    library and its extension modules, wherever sys.path has them), this directory, the
    directories of `voice_files`, the system libraries, and its own /proc entry."""
    paths = [sys.prefix, os.path.dirname(os.path.abspath(__file__))]
    paths += [entry for entry in sys.path if entry]
    paths += [os.path.dirname(os.path.abspath(path)) for path in voice_files]
    return paths + _SYSTEM_PATHS + [f"/proc/{os.getpid()}"]


def _fs_access(abi):
    """Every right the ABI knows: granted only as the read rules say."""
    access = (1 << 13) - 1  # EXECUTE … MAKE_SYM
    if abi >= 2:
        access |= 1 << 13  # REFER
    if abi >= 3:
        access |= 1 << 14  # TRUNCATE
    if abi >= 5:
        access |= 1 << 15  # IOCTL_DEV
    return access


def _landlock(libc, readable):
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 0:
        return "no Landlock (" + os.strerror(ctypes.get_errno()) + ")"
    attr = _RulesetAttr(_fs_access(abi), (1 | 2) if abi >= 4 else 0, (1 | 2) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    granted = []
    try:
        for path in dict.fromkeys(readable):
            try:
                descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # /lib64 on arm64, a zip of the standard library that is not there
            try:
                # A rule on a file may only grant file rights.
                directory = stat.S_ISDIR(os.fstat(descriptor).st_mode)
                rule = _PathBeneathAttr(_LANDLOCK_READ_FILE | (_LANDLOCK_READ_DIR if directory else 0), descriptor)
                if libc.syscall(
                    _SYS_LANDLOCK_ADD_RULE, ruleset, ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                    ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(descriptor)
            granted.append(path)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    parts = [f"reads only beneath {len(granted)} paths", "no writes or exec anywhere"]
    if abi >= 4:
        parts.append("no TCP")
    if abi >= 6:
        parts.append("scoped signals and abstract sockets")
    return f"Landlock ABI {abi} ({', '.join(parts)})"


# SeccompFilter.denied: calls that fail outright.
_DENIED_CALLS = [
    # Network, and new Unix sockets.
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # Other programs and processes (fork and vfork: below).
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "tkill",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "kcmp", "process_madvise", "process_mrelease",
    "ioprio_set",
    # Sockets it holds: no options, no shutdown.
    "setsockopt", "shutdown",
    # Creating, changing and removing files (opening for write is filtered below).
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir",
    "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes", "utimensat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "memfd_create",
    "name_to_handle_at", "open_by_handle_at",
    # The system itself.
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "capset",
    "fanotify_init", "inotify_init", "inotify_init1", "quotactl", "syslog", "vhangup", "mbind",
    "move_pages", "migrate_pages", "lookup_dcookie",
]
# fcntl commands and ioctl requests that make the kernel signal a process of the caller's choosing
# (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE; FIOSETOWN, SIOCSPGRP), and TIOCSTI.
_SIGNALLING_FCNTLS = [8, 10, 15, 1024]
_SIGNALLING_IOCTLS = [0x8901, 0x8902, 0x5412]
# Calls that change another process's scheduling or resource limits: refused unless their pid is 0.
_SCHEDULING_OTHERS = ["sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity", "prlimit64"]
_SIGNALS = ["kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"]
_MESSAGES = ["sendmsg", "sendmmsg", "sendto", "recvmsg", "recvmmsg", "recvfrom"]

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_FLTATR_CTL_TSYNC = 4
_SCMP_CMP_LT, _SCMP_CMP_GE, _SCMP_CMP_GT, _SCMP_CMP_MASKED_EQ = 2, 5, 6, 7
_CLONE_THREAD = 0x00010000
# pid_t arguments arrive sign-extended or not: only their low 32 bits are compared.
_LOW = 0xFFFFFFFF


def _errno_action(code):
    return 0x00050000 | code  # SCMP_ACT_ERRNO


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64),
    ]


class _Filter:
    """A libseccomp filter: allow by default, the rules added one by one."""

    def __init__(self, library):
        self.library = library
        self.context = library.seccomp_init(_SCMP_ACT_ALLOW)
        if not self.context:
            raise OSError(errno.ENOMEM, "seccomp_init")
        # Every thread of the process, not only the caller: onnxruntime's run the model.
        result = library.seccomp_attr_set(self.context, _SCMP_FLTATR_CTL_TSYNC, 1)
        if result != 0:
            library.seccomp_release(self.context)
            raise OSError(-result, "seccomp cannot filter every thread (SCMP_FLTATR_CTL_TSYNC)")

    def add(self, action, name, *comparisons):
        """`action` for `name` when every comparison (argument, operation, a, b) holds."""
        number = self.library.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # a call this architecture does not have needs no rule
        array = (_ArgCmp * max(1, len(comparisons)))(*[_ArgCmp(*comparison) for comparison in comparisons])
        result = self.library.seccomp_rule_add_array(self.context, action, number, len(comparisons), array)
        if result != 0:
            raise OSError(-result, f"seccomp rule for {name}")

    def deny_unless(self, action, name, argument, value):
        """`action` for `name` unless its `argument` is `value`: seccomp has no masked "not
        equal", so the rule is three ranges, each a rule of its own (a value with any of its
        upper 32 bits set is not `value`, sign-extended or not)."""
        self.add(action, name, (argument, _SCMP_CMP_GE, 1 << 32, 0))
        if value > 0:
            self.add(action, name, (argument, _SCMP_CMP_LT, value, 0))
        self.add(action, name, (argument, _SCMP_CMP_GT, value, 0))

    def load(self):
        result = self.library.seccomp_load(self.context)
        self.library.seccomp_release(self.context)
        if result != 0:
            raise OSError(-result, "seccomp_load")


def _libseccomp():
    try:
        library = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    library.seccomp_init.restype = ctypes.c_void_p
    library.seccomp_init.argtypes = [ctypes.c_uint32]
    library.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    library.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    library.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    library.seccomp_load.argtypes = [ctypes.c_void_p]
    library.seccomp_release.argtypes = [ctypes.c_void_p]
    return library


def _seccomp(library):
    """SeccompFilter.load(process: true), rule for rule."""
    if library is None:
        return "no seccomp (libseccomp.so.2 missing)"
    rules = _Filter(library)
    deny = _errno_action(errno.EPERM)
    for name in _DENIED_CALLS:
        rules.add(deny, name)
    # clone3 and openat2 pass their flags in memory a filter cannot read: ENOSYS makes glibc use
    # clone and openat.
    rules.add(_errno_action(errno.ENOSYS), "clone3")
    rules.add(_errno_action(errno.ENOSYS), "openat2")
    # Opening for reading is allowed; any flag that writes or creates is not.
    for flag in [os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND]:
        rules.add(deny, "openat", (2, _SCMP_CMP_MASKED_EQ, flag, flag))
        rules.add(deny, "open", (1, _SCMP_CMP_MASKED_EQ, flag, flag))
    # Another process's scheduling and limits: only pid 0 (itself); setpriority only
    # PRIO_PROCESS (0) of 0, since a process group or a user would reach the daemon.
    for name in _SCHEDULING_OTHERS:
        rules.deny_unless(deny, name, 0, 0)
    rules.deny_unless(deny, "setpriority", 0, 0)
    rules.deny_unless(deny, "setpriority", 1, 0)
    for command in _SIGNALLING_FCNTLS:
        rules.add(deny, "fcntl", (1, _SCMP_CMP_MASKED_EQ, _LOW, command))
    for request in _SIGNALLING_IOCTLS:
        rules.add(deny, "ioctl", (1, _SCMP_CMP_MASKED_EQ, _LOW, request))
    parent = os.getppid() & _LOW
    for name in ["kill", "rt_sigqueueinfo"]:
        rules.add(deny, name, (0, _SCMP_CMP_MASKED_EQ, _LOW, 0))
        rules.add(deny, name, (0, _SCMP_CMP_MASKED_EQ, 0x80000000, 0x80000000))
        rules.add(deny, name, (0, _SCMP_CMP_MASKED_EQ, _LOW, parent))
    for name in ["tgkill", "rt_tgsigqueueinfo"]:
        rules.add(deny, name, (0, _SCMP_CMP_MASKED_EQ, _LOW, parent))
    # No new process (a thread is a clone with CLONE_THREAD; one without it is a process).
    rules.add(deny, "fork")
    rules.add(deny, "vfork")
    rules.add(deny, "clone", (0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0))
    # Signals only to itself (abort() raises SIGABRT with tgkill on its own process).
    for name in _SIGNALS:
        rules.deny_unless(deny, name, 0, os.getpid() & _LOW)
    # No message on a socket (the worker has pipes only).
    for name in _MESSAGES:
        rules.add(deny, name)
    rules.load()
    return "seccomp (the espeak-ng worker's rules: EPERM)"


def _worker_user(user):
    import pwd

    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        raise PermissionError(f"'{user}' is root; the Piper worker never runs as root")
    return entry


def _drop_root(libc, entry):
    # Every capability out of the bounding set while root may still drop them (CAP_SETPCAP).
    capability = 0
    while libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) == 0:
        capability += 1
    if ctypes.get_errno() != errno.EINVAL:
        raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {capability})")
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
    return f"user {entry.pw_name} (no capabilities)"


class Sandbox:
    """The worker's confinement, in its two steps."""

    def __init__(self, readable, user=None):
        """Confines reads to `readable` now (before any thread exists), and looks up `user`, the
        user to become when started as root (default nobody)."""
        tasks = os.listdir("/proc/self/task")
        if len(tasks) != 1:
            raise RuntimeError(f"Landlock would not hold for the {len(tasks) - 1} threads already running")
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.user = _worker_user(user or "nobody") if os.geteuid() == 0 or os.getuid() == 0 else None
        self.seccomp = _libseccomp()
        if self.libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        self.landlock = _landlock(self.libc, readable)

    def confine(self, memory_limit_mib=0):
        """The rest, once the voice is loaded; what the sandbox enforces."""
        parts = [_drop_root(self.libc, self.user)] if self.user else []
        parts.append("no_new_privs")
        if memory_limit_mib > 0:
            limit = memory_limit_mib << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            parts.append(f"RLIMIT_AS {memory_limit_mib} MiB")
        parts.append(self.landlock)
        parts.append(_seccomp(self.seccomp))
        return "; ".join(parts)
