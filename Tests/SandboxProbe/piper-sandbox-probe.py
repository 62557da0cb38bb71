"""Confines itself as the Piper worker does, then tries what a hijacked Piper worker would try,
printing one line per attempt: `NAME allowed` or `NAME refused: reason`; then `render allowed`
when the voice still renders, `status FIELD VALUE` for what /proc/self/status says, and
`thread TID Seccomp VALUE` for each of its threads.

Usage: python3 -I piper-sandbox-probe.py WORKER VOICE_DIR OUTSIDE_FILE TARGET_PID WORKER_ARGUMENTS...

WORKER is speakd-piper-worker.py: the probe loads the voice and confines itself with the worker's
own `start` (the same calls, in the same order), given WORKER_ARGUMENTS (its --model and --config
are in VOICE_DIR, beside an `inside.txt`). OUTSIDE_FILE stands for the daemon's token: readable by
the worker's user, outside every path the worker reads. TARGET_PID is another process of the
user the worker runs as, which the attempts signal, re-limit and reschedule; the test checks
afterwards that it was not touched. It is the Piper counterpart of speakd-sandbox-probe (the same
names where the attempt is the same); PiperTests.sandboxProbe runs it. It is not installed.
"""

import ctypes
import errno
import importlib.util
import os
import resource
import signal
import sys
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
seccomp = ctypes.CDLL("libseccomp.so.2")
seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]


class Refused(Exception):
    pass


def call(name, *arguments):
    """Makes the system call `name` directly (not through a wrapper, which may use another call),
    as a hijacked worker would; raises Refused with its reason."""
    number = seccomp.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        raise Refused(os.strerror(errno.ENOSYS))
    values = [ctypes.c_long(value) if isinstance(value, int) else value for value in arguments]
    result = libc.syscall(ctypes.c_long(number), *values)
    if result < 0:
        raise Refused(os.strerror(ctypes.get_errno()))
    return result


def attempt(name, body):
    try:
        body()
    except Refused as refusal:
        print(f"{name} refused: {refusal}", flush=True)
    except OSError as error:
        print(f"{name} refused: {os.strerror(error.errno) if error.errno else error}", flush=True)
    else:
        print(f"{name} allowed", flush=True)


def opened(path, flags, mode=0o600):
    os.close(os.open(path, flags, mode))


class IOVector(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class MessageHeader(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p), ("name_length", ctypes.c_uint32), ("vectors", ctypes.POINTER(IOVector)),
        ("count", ctypes.c_size_t), ("control", ctypes.c_void_p), ("control_length", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


def unix_address(path):
    raw = path.encode()
    address = ctypes.create_string_buffer(110)
    address[0:2] = (1).to_bytes(2, sys.byteorder)  # AF_UNIX
    address[2:2 + len(raw)] = raw
    return address


def try_files(voice, outside, target):
    inside = os.path.join(voice, "inside.txt")
    attempt("read-inside", lambda: opened(inside, os.O_RDONLY))
    attempt("list-inside", lambda: opened(voice, os.O_RDONLY | os.O_DIRECTORY))
    attempt("read-outside", lambda: opened(outside, os.O_RDONLY))
    attempt("read-etc", lambda: opened("/etc/passwd", os.O_RDONLY))
    attempt("read-proc-other", lambda: opened(f"/proc/{target}/cmdline", os.O_RDONLY))
    attempt("write-inside", lambda: opened(inside, os.O_WRONLY))
    created = f"/tmp/speakd-piper-sandbox-probe-{os.getpid()}"
    attempt("create-tmp", lambda: opened(created, os.O_WRONLY | os.O_CREAT))
    attempt("unlink-inside", lambda: os.unlink(inside))


def try_sockets(held, loose, listening):
    attempt("tcp-socket", lambda: os.close(call("socket", 2, 1, 0)))  # AF_INET, SOCK_STREAM
    attempt("unix-socket", lambda: os.close(call("socket", 1, 1, 0)))
    ends = (ctypes.c_int * 2)()
    attempt("socketpair", lambda: call("socketpair", 1, 1, 0, ends))
    address = unix_address(listening)
    attempt("connect-unix", lambda: call("connect", loose, address, len(address)))
    # A ring would connect, send and open on the worker's behalf, past the rules on each call.
    parameters = ctypes.create_string_buffer(120)
    attempt("io-uring-setup", lambda: os.close(call("io_uring_setup", 4, parameters)))
    size = ctypes.c_int(4096)
    attempt("setsockopt-held", lambda: call("setsockopt", held, 1, 7, ctypes.byref(size), 4))  # SO_SNDBUF
    byte = ctypes.create_string_buffer(b"x", 1)
    vector = IOVector(ctypes.cast(byte, ctypes.c_void_p), 1)
    message = MessageHeader(None, 0, ctypes.pointer(vector), 1, None, 0, 0)
    attempt("sendmsg-held", lambda: call("sendmsg", held, ctypes.byref(message), 0))
    attempt("sendto-held", lambda: call("sendto", held, byte, 1, 0, None, 0))
    attempt("shutdown-held", lambda: call("shutdown", held, 2))


def try_processes():
    attempt("signal-self", lambda: call("kill", os.getpid(), 0))

    def spawn():
        pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
        os.waitpid(pid, 0)

    attempt("exec", spawn)

    def fork(raw):
        pid = call("fork") if raw else os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    attempt("fork", lambda: fork(False))
    attempt("fork-syscall", lambda: fork(True))
    attempt("unshare", lambda: call("unshare", 0x10000000 | 0x40000000))  # CLONE_NEWUSER | CLONE_NEWNET
    attempt("memfd-create", lambda: os.close(call("memfd_create", ctypes.c_char_p(b"probe"), 0)))
    # KEYCTL_GET_KEYRING_ID of the session keyring, creating none: reads, changes nothing.
    attempt("keyctl", lambda: call("keyctl", 0, -3, 0))

    def thread():
        done = threading.Event()
        started = threading.Thread(target=done.set)
        started.start()
        started.join(5)
        if not done.is_set():
            raise Refused("the thread did not run")

    attempt("thread", thread)
    attempt("relimit-self", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    attempt("setuid-root", lambda: call("setuid", 0))
    # Signal 0 only: nothing is delivered where one is wrongly allowed.
    attempt("signal-group", lambda: call("kill", 0, 0))
    attempt("signal-all", lambda: call("kill", -1, 0))
    attempt("signal-parent", lambda: call("kill", os.getppid(), 0))
    # Reads the parent's limit, changes nothing.
    limit = (ctypes.c_uint64 * 2)()
    attempt("relimit-parent", lambda: call("prlimit64", os.getppid(), 7, None, limit))  # RLIMIT_NOFILE


def try_other_process(target, held):
    terminate = int(signal.SIGTERM)
    attempt("signal-other", lambda: call("kill", target, terminate))
    attempt("tgkill-other", lambda: call("tgkill", target, target, terminate))
    # siginfo_t: si_signo, si_errno, si_code (SI_QUEUE, as sigqueue sends), then the rest.
    information = (ctypes.c_int32 * 32)(terminate, 0, -1)
    attempt("sigqueue-other", lambda: call("rt_sigqueueinfo", target, terminate, information))
    attempt("tgsigqueue-other", lambda: call("rt_tgsigqueueinfo", target, target, terminate, information))
    attempt("pidfd-other", lambda: os.close(call("pidfd_open", target, 0)))
    limit = (ctypes.c_uint64 * 2)(16, 16)
    attempt("relimit-other", lambda: call("prlimit64", target, 7, limit, None))  # RLIMIT_NOFILE
    attempt("renice-other", lambda: call("setpriority", 0, target, 19))  # PRIO_PROCESS
    attempt("renice-group", lambda: call("setpriority", 1, 0, 19))  # PRIO_PGRP
    parameters = (ctypes.c_int * 1)(0)
    attempt("reschedule-other", lambda: call("sched_setscheduler", target, 5, parameters))  # SCHED_IDLE
    mask = (ctypes.c_uint64 * 1)(1)
    attempt("affinity-other", lambda: call("sched_setaffinity", target, 8, mask))
    attempt("setown-other", lambda: call("fcntl", held, 8, target))  # F_SETOWN
    attempt("setsig-held", lambda: call("fcntl", held, 10, terminate))  # F_SETSIG
    owner = ctypes.c_int(target)
    attempt("fiosetown-other", lambda: call("ioctl", held, 0x8901, ctypes.byref(owner)))
    attempt("ptrace-other", lambda: call("ptrace", 0x4206, target, 0, 0))  # PTRACE_SEIZE
    buffer = ctypes.create_string_buffer(8)
    local = IOVector(ctypes.cast(buffer, ctypes.c_void_p), 8)
    remote = IOVector(0x1000, 8)
    attempt(
        "read-memory-other",
        lambda: call("process_vm_readv", target, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))


def main():
    worker_path, voice, outside, target = sys.argv[1:5]
    target = int(target)
    # A connected pair stands for a socket the worker holds, and a listening Unix socket, open
    # to every user, for one on the kiosk (PulseAudio's, the daemon's): made before confinement.
    ends = (ctypes.c_int * 2)()
    call("socketpair", 1, 1, 0, ends)
    held = ends[0]
    loose = call("socket", 1, 1, 0)
    listener = call("socket", 1, 1, 0)
    listening = os.path.join(voice, "listening.sock")
    address = unix_address(listening)
    call("bind", listener, address, len(address))
    call("listen", listener, 4)
    os.chmod(listening, 0o777)

    specification = importlib.util.spec_from_file_location("speakd_piper_worker", worker_path)
    worker = importlib.util.module_from_spec(specification)
    specification.loader.exec_module(worker)
    renderer, _, sandbox = worker.start(sys.argv[5:])
    print(f"report {sandbox}", flush=True)

    try_files(voice, outside, target)
    try_sockets(held, loose, listening)
    try_processes()
    try_other_process(target, held)

    samples = sum(len(part) for part, _ in renderer.render_piece("Platform four.", 1.0))
    print("render allowed" if samples > 0 else "render refused: no samples", flush=True)
    with open("/proc/self/status", encoding="utf-8") as file:
        for line in file:
            name, _, value = line.partition(":")
            if value.split():
                print(f"status {name} {value.split()[0]}")
    for task in sorted(os.listdir("/proc/self/task")):
        with open(f"/proc/self/task/{task}/status", encoding="utf-8") as file:
            fields = dict(line.split(":", 1) for line in file if ":" in line)
        print(f"thread {task} Seccomp {fields['Seccomp'].strip()}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
