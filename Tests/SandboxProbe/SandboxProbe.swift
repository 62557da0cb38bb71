import EngineSandbox
import Foundation

/// Enters the engine sandbox with one readable directory, then tries what a hijacked engine
/// worker would try, printing one line per attempt: `NAME allowed` or `NAME refused: reason`.
/// With `--forked`, it enters the sandbox as the worker template does, forks, and the child
/// confines itself as a forked worker does before it tries. The sandbox tests run it; it is not
/// installed.
@main
struct SandboxProbe {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let forked = arguments.first == "--forked"
        if forked { arguments.removeFirst() }
        guard arguments.count == 2 else {
            print("usage: speakd-sandbox-probe [--forked] READABLE_DIR OUTSIDE_FILE")
            exit(2)
        }
        let readable = arguments[0]
        let outside = arguments[1]
        do {
            let report = try EngineSandbox.enter(readablePaths: [readable], forksWorkers: forked)
            print("report \(report)")
        } catch {
            print("enter failed: \(error)")
            exit(1)
        }
        fflush(nil)
        if forked {
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
        attempt("signal-self") { kill(getpid(), 0) }
        attempt("read-inside") { open("\(readable)/inside.txt", O_RDONLY) }
        attempt("list-inside") { open(readable, O_RDONLY | O_DIRECTORY) }
        attempt("read-outside") { open(outside, O_RDONLY) }
        attempt("write-inside") { open("\(readable)/inside.txt", O_WRONLY) }
        attempt("create-tmp") { open("/tmp/speakd-sandbox-probe-\(getpid())", O_WRONLY | O_CREAT, 0o600) }
        attempt("unlink-inside") { unlink("\(readable)/inside.txt") }
        attempt("tcp-socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("unix-socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("exec") {
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            let status = posix_spawn(&pid, "/bin/true", nil, nil, argv, nil)
            errno = status
            return status == 0 ? 0 : -1
        }
        attempt("fork") { fork() }
        attempt("signal-init") { kill(1, 0) }
        attempt("thread") {
            let done = DispatchSemaphore(value: 0)
            Thread { done.signal() }.start()
            return done.wait(timeout: .now() + 5) == .success ? 0 : -1
        }
        exit(0)
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
