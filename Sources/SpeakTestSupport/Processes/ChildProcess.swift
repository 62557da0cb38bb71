import Foundation
import PosixSupport
import Synchronization

/// A child process for tests, started with `posix_spawn` in its own process group and reaped
/// with `waitpid`, and only ever signalled by its PID.
///
/// Foundation's `Process` was not used because, in the test runner here, it never noticed its
/// children exit (they stayed zombies and `isRunning` stayed true); polling `waitpid` does not
/// depend on signal delivery.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    public let executable: String
    private let status = Mutex<Int32?>(nil)

    /// What went wrong starting a process.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `executable` with `arguments` and exactly `environment`.
    /// - Parameters:
    ///   - output: a file that receives standard output (appended), and standard error too unless
    ///     `errorOutput` is given; nil for /dev/null.
    ///   - errorOutput: a separate file for standard error (appended).
    ///   - input: a file read as standard input; nil for /dev/null.
    ///   - networkNamespace: runs it in this network namespace (`ip netns exec`, as root), which
    ///     execs it in place, so `pid` is still its own.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String], output: String? = nil,
        errorOutput: String? = nil, input: String? = nil, networkNamespace: String? = nil
    ) throws {
        self.executable = executable
        let (program, arguments) =
            networkNamespace.map { ("/usr/sbin/ip", ["netns", "exec", $0, executable] + arguments) }
            ?? (executable, arguments)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, input ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errorOutput {
            posix_spawn_file_actions_addopen(&actions, 2, errorOutput, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }

        // Its own process group keeps terminal signals away from it; a clean signal mask and
        // default handlers keep the test runner's settings out of it.
        do {
            pid = try SpawnedProcess.spawn(
                program, arguments: arguments, environment: environment.map { "\($0.key)=\($0.value)" },
                actions: &actions, ownProcessGroup: true)
        } catch {
            throw Failure(description: "cannot start \(executable): \(String(cString: strerror(error.code)))")
        }
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            kill(pid, SIGCONT)
            var code: Int32 = 0
            waitpid(pid, &code, 0)
        }
    }

    /// True until the process has exited (and been reaped).
    public var isRunning: Bool { exitStatus == nil }

    /// The exit status (or 128 + signal), once the process has exited.
    public var exitStatus: Int32? {
        status.withLock { status in
            if status == nil {
                var code: Int32 = 0
                if waitpid(pid, &code, WNOHANG) == pid {
                    switch SpawnedProcess.Termination(waitStatus: code) {
                    case .exited(let exitStatus): status = exitStatus
                    case .signalled(let signal): status = 128 + signal
                    }
                }
            }
            return status
        }
    }

    /// Sends `signal` to the process by its PID, unless it has already been reaped.
    public func send(_ signal: Int32) {
        status.withLock { status in
            if status == nil { kill(pid, signal) }
        }
    }

    /// Waits up to `timeout` for the process to exit; returns its status, or nil if it still runs.
    public func wait(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = exitStatus { return status }
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Ends the process: SIGTERM (and SIGCONT, should it be stopped), then SIGKILL after `grace`.
    public func terminate(grace: Duration = .seconds(1)) async {
        send(SIGTERM)
        send(SIGCONT)
        if await wait(timeout: grace) == nil {
            send(SIGKILL)
            _ = await wait(timeout: .seconds(10))
        }
    }
}
