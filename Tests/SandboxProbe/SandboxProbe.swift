import EngineSandbox
import Foundation

/// Enters the engine sandbox with one readable directory, then tries what a hijacked engine
/// worker would try, printing one line per attempt: `NAME allowed` or `NAME refused: reason`,
/// then `status FIELD VALUE` for what `/proc/self/status` says of its identity and confinement.
///
/// `--as` says where the attempts run: `worker` enters the sandbox as the worker template does
/// (`speakd-engine-worker`, the same calls), forks, and the child confines itself as a forked
/// worker does before it tries; `template` tries in the template itself; `process` enters the
/// sandbox as one process that forks nothing. `TARGET_PID` is another process (of the user the
/// worker runs as) that the attempts signal, re-limit and reschedule; the tests check afterwards
/// that it was not touched. A connected socket pair made before entering stands for a socket the
/// process holds (the template's control socket). The sandbox tests run it; it is not installed.
@main
struct SandboxProbe {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var mode = "process"
        var user = EngineSandbox.defaultUser
        while arguments.count > 3 {
            let flag = arguments.removeFirst()
            let value = arguments.removeFirst()
            switch flag {
            case "--as": mode = value
            case "--user": user = value
            default: usage()
            }
        }
        guard arguments.count == 3, ["process", "template", "worker"].contains(mode),
            let target = pid_t(arguments[2])
        else { usage() }
        let readable = arguments[0]
        let outside = arguments[1]
        var held: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &held) == 0 else {
            print("socketpair failed: \(String(cString: strerror(errno)))")
            exit(1)
        }
        // Resolved before the sandbox, as everything a worker needs is.
        _ = syscallFunction
        do {
            let report = try EngineSandbox.enter(readablePaths: [readable], forksWorkers: mode != "process", user: user)
            print("report \(report)")
        } catch {
            print("enter failed: \(error)")
            exit(1)
        }
        fflush(nil)
        if mode == "worker" {
            let child = fork()
            guard child >= 0 else {
                print("fork for the worker failed: \(String(cString: strerror(errno)))")
                exit(1)
            }
            if child > 0 {
                var status: Int32 = 0
                waitpid(child, &status, 0)
                exit(status == 0 ? 0 : 1)
            }
            do {
                try EngineSandbox.confineForkedWorker()
            } catch {
                print("confining the forked worker failed: \(error)")
                exit(1)
            }
        }
        tryFiles(readable: readable, outside: outside)
        trySockets(held: held[0])
        tryProcesses()
        tryOtherProcess(target, held: held[0])
        for line in (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8))?.split(separator: "\n") ?? [] {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = parts[1].split(whereSeparator: \.isWhitespace).first ?? ""
            print("status \(parts[0]) \(value)")
        }
        exit(0)
    }

    static func usage() -> Never {
        print(
            "usage: speakd-sandbox-probe [--as process|template|worker] [--user NAME] READABLE_DIR OUTSIDE_FILE TARGET_PID"
        )
        exit(2)
    }

    static func tryFiles(readable: String, outside: String) {
        attempt("read-inside") { open("\(readable)/inside.txt", O_RDONLY) }
        attempt("list-inside") { open(readable, O_RDONLY | O_DIRECTORY) }
        attempt("read-outside") { open(outside, O_RDONLY) }
        attempt("write-inside") { open("\(readable)/inside.txt", O_WRONLY) }
        attempt("create-tmp") { open("/tmp/speakd-sandbox-probe-\(getpid())", O_WRONLY | O_CREAT, 0o600) }
        attempt("unlink-inside") { unlink("\(readable)/inside.txt") }
    }

    static func trySockets(held: Int32) {
        attempt("tcp-socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("unix-socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("socketpair") {
            var ends: [Int32] = [-1, -1]
            return socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends)
        }
        attempt("setsockopt-held") {
            var size: Int32 = 4096
            return setsockopt(held, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        attempt("sendmsg-held") {
            var byte: UInt8 = 1
            return withUnsafeMutablePointer(to: &byte) { pointer in
                var vector = iovec(iov_base: pointer, iov_len: 1)
                return withUnsafeMutablePointer(to: &vector) { vectors in
                    var message = msghdr()
                    message.msg_iov = vectors
                    message.msg_iovlen = 1
                    return Int32(sendmsg(held, &message, 0))
                }
            }
        }
        attempt("shutdown-held") { shutdown(held, Int32(SHUT_RDWR)) }
    }

    static func tryProcesses() {
        attempt("signal-self") { kill(getpid(), 0) }
        attempt("exec") {
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            let status = posix_spawn(&pid, "/bin/true", nil, nil, argv, nil)
            if status == 0 { waitpid(pid, nil, 0) }
            errno = status
            return status == 0 ? 0 : -1
        }
        attempt("fork") {
            let pid = fork()
            if pid == 0 { _exit(0) }
            if pid > 0 { waitpid(pid, nil, 0) }
            return pid
        }
        attempt("thread") {
            let done = DispatchSemaphore(value: 0)
            Thread { done.signal() }.start()
            return done.wait(timeout: .now() + 5) == .success ? 0 : -1
        }
        attempt("relimit-self") {
            var limit = rlimit(rlim_cur: 0, rlim_max: 0)
            return setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        }
        attempt("setuid-root") { Int32(rawSyscall("setuid", 0)) }
        // Signal 0 only: nothing is delivered where one is wrongly allowed.
        attempt("signal-group") { Int32(rawSyscall("kill", 0, 0)) }
        attempt("signal-all") { Int32(rawSyscall("kill", -1, 0)) }
        attempt("signal-parent") { Int32(rawSyscall("kill", Int(getppid()), 0)) }
    }

    /// What reaches `target`, each call made directly (not through a glibc wrapper, which may use
    /// another call): what a hijacked worker would do.
    static func tryOtherProcess(_ target: pid_t, held: Int32) {
        let pid = Int(target)
        let terminate = Int(SIGTERM)
        attempt("signal-other") { Int32(rawSyscall("kill", pid, terminate)) }
        attempt("tgkill-other") { Int32(rawSyscall("tgkill", pid, pid, terminate)) }
        // siginfo_t: si_signo, si_errno, si_code (SI_QUEUE, as sigqueue sends), then the rest.
        var information = [Int32](repeating: 0, count: 32)
        information[0] = SIGTERM
        information[2] = -1
        attempt("sigqueue-other") {
            Int32(rawSyscall("rt_sigqueueinfo", pid, terminate, address(&information)))
        }
        attempt("tgsigqueue-other") {
            Int32(rawSyscall("rt_tgsigqueueinfo", pid, pid, terminate, address(&information)))
        }
        attempt("pidfd-other") { Int32(rawSyscall("pidfd_open", pid, 0)) }
        var limit: [UInt64] = [16, 16]
        attempt("relimit-other") {
            Int32(rawSyscall("prlimit64", pid, Int(RLIMIT_NOFILE.rawValue), address(&limit), 0))
        }
        attempt("renice-other") { Int32(rawSyscall("setpriority", Int(PRIO_PROCESS.rawValue), pid, 19)) }
        attempt("renice-group") { Int32(rawSyscall("setpriority", Int(PRIO_PGRP.rawValue), 0, 19)) }
        var parameters: [Int32] = [0]
        attempt("reschedule-other") {
            Int32(rawSyscall("sched_setscheduler", pid, 5 /* SCHED_IDLE */, address(&parameters)))
        }
        var mask: [UInt64] = [1]
        attempt("affinity-other") { Int32(rawSyscall("sched_setaffinity", pid, 8, address(&mask))) }
        attempt("setown-other") { Int32(rawSyscall("fcntl", Int(held), 8 /* F_SETOWN */, pid)) }
        attempt("setsig-held") { Int32(rawSyscall("fcntl", Int(held), 10 /* F_SETSIG */, terminate)) }
        var owner = Int32(target)
        attempt("fiosetown-other") { Int32(rawSyscall("ioctl", Int(held), 0x8901, address(&owner))) }
        attempt("ptrace-other") { Int32(rawSyscall("ptrace", 0x4206 /* PTRACE_SEIZE */, pid, 0, 0)) }
        var buffer = [UInt8](repeating: 0, count: 8)
        var local = iovec(iov_base: address(&buffer), iov_len: 8)
        var remote = iovec(iov_base: UnsafeMutableRawPointer(bitPattern: 0x1000), iov_len: 8)
        attempt("read-memory-other") {
            Int32(rawSyscall("process_vm_readv", pid, address(&local), 1, address(&remote), 1, 0))
        }
    }

    /// The address of `value` for a system call's argument (the probe is one thread, and the
    /// value outlives the call).
    static func address<T>(_ value: inout T) -> UnsafeMutableRawPointer {
        withUnsafeMutablePointer(to: &value) { UnsafeMutableRawPointer($0) }
    }

    static func address<T>(_ value: inout [T]) -> UnsafeMutableRawPointer {
        value.withUnsafeMutableBytes { $0.baseAddress! }
    }

    /// glibc's `syscall`, which Swift cannot call (it is variadic); its x86_64 and arm64 code
    /// reads its integer arguments from the registers as a plain function's would.
    static let syscallFunction: @convention(c) (Int, Int, Int, Int, Int, Int, Int) -> Int = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "syscall") else {
            fatalError("no syscall in glibc")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (Int, Int, Int, Int, Int, Int, Int) -> Int).self)
    }()

    /// Makes the system call `name` with `arguments` (Int, or a pointer); -1 with ENOSYS when
    /// this architecture has no such call.
    static func rawSyscall(_ name: String, _ arguments: Any...) -> Int {
        guard let number = EngineSandbox.systemCallNumber(name) else {
            errno = ENOSYS
            return -1
        }
        var values = arguments.map { argument -> Int in
            if let pointer = argument as? UnsafeMutableRawPointer { return Int(bitPattern: pointer) }
            return argument as? Int ?? 0
        }
        values += Array(repeating: 0, count: 6 - values.count)
        return syscallFunction(number, values[0], values[1], values[2], values[3], values[4], values[5])
    }

    /// Runs `body`, which returns a negative number and sets `errno` when refused.
    static func attempt(_ name: String, _ body: () -> Int32) {
        let result = body()
        if result >= 0 {
            print("\(name) allowed")
        } else {
            print("\(name) refused: \(String(cString: strerror(errno)))")
        }
        fflush(nil)
    }
}
