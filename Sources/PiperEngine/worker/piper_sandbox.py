"""Confines the Piper worker once its model is loaded (speakd-piper-worker.py).

What it enforces, each reported in the returned description (and failing the start when the
kernel offers it but it cannot be applied):
- PR_SET_NO_NEW_PRIVS.
- Landlock (any ABI): no file may be written, created, removed, renamed, truncated or executed;
  from ABI 4 no TCP bind or connect; from ABI 6 signals and abstract Unix sockets scoped to the
  worker. Reading stays allowed everywhere (onnxruntime reads /proc and /sys).
- seccomp (through libseccomp, when present): socket, socketpair, execve, execveat, ptrace,
  process_vm_writev, mount, bpf and kexec fail with EPERM.
- RLIMIT_AS, when a memory limit is given.
- Started as root, it becomes `user` (speakd's --engine-worker-user) with no supplementary
  groups, so no capability stays with it.
"""

import ctypes
import errno
import os
import resource

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


def _fs_access(abi):
    access = (1 << 0)  # EXECUTE
    access |= (1 << 1)  # WRITE_FILE
    for bit in range(4, 13):  # REMOVE_DIR … MAKE_SYM
        access |= 1 << bit
    if abi >= 2:
        access |= 1 << 13  # REFER
    if abi >= 3:
        access |= 1 << 14  # TRUNCATE
    if abi >= 5:
        access |= 1 << 15  # IOCTL_DEV
    return access


def _landlock(libc):
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 0:
        return "no Landlock (" + os.strerror(ctypes.get_errno()) + ")"
    attr = _RulesetAttr(_fs_access(abi), (1 | 2) if abi >= 4 else 0, (1 | 2) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    descriptor = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if descriptor < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, descriptor, ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(descriptor)
    parts = ["no writes or exec anywhere"]
    if abi >= 4:
        parts.append("no TCP")
    if abi >= 6:
        parts.append("scoped signals and abstract sockets")
    return f"Landlock ABI {abi} ({', '.join(parts)})"


_DENIED_CALLS = [
    "socket", "socketpair", "execve", "execveat", "ptrace", "process_vm_writev", "mount", "bpf",
    "kexec_load", "kexec_file_load",
]


def _seccomp():
    try:
        seccomp = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return "no seccomp (libseccomp.so.2 missing)"
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    seccomp.seccomp_release.argtypes = [ctypes.c_void_p]
    allow = 0x7FFF0000
    context = seccomp.seccomp_init(allow)
    if not context:
        raise OSError(errno.ENOMEM, "seccomp_init")
    deny = 0x00050000 | errno.EPERM  # SCMP_ACT_ERRNO(EPERM)
    for name in _DENIED_CALLS:
        number = seccomp.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            continue
        result = seccomp.seccomp_rule_add(context, deny, number, 0)
        if result != 0:
            raise OSError(-result, f"seccomp_rule_add {name}")
    result = seccomp.seccomp_load(context)
    seccomp.seccomp_release(context)
    if result != 0:
        raise OSError(-result, "seccomp_load")
    return "seccomp (EPERM: " + ", ".join(_DENIED_CALLS) + ")"


def _drop_root(user):
    import pwd

    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        raise PermissionError(f"'{user}' is root; the Piper worker never runs as root")
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
    return f"user {user}"


def confine(memory_limit_mib=0, user=None):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    dropped = None
    if os.geteuid() == 0 or os.getuid() == 0:
        dropped = _drop_root(user or "nobody")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    parts = ([dropped] if dropped else []) + ["no_new_privs"]
    if memory_limit_mib > 0:
        limit = memory_limit_mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        parts.append(f"RLIMIT_AS {memory_limit_mib} MiB")
    parts.append(_landlock(libc))
    parts.append(_seccomp())
    return "; ".join(parts)
