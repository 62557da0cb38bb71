import CPosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, its standard input, output and error on pipes.
///
/// Written here rather than taken from Foundation's `Process` (which loads Foundation, ICU and
/// CoreFoundation into the daemon) or swift-subprocess (which ties a child's life to one async
/// call and reads its output through async sequences): an engine worker lives as long as the
/// daemon, and its frames are read with blocking reads on a thread of its own.
public final class SpawnedProcess: Sendable {
    /// How a process ended.
    public enum Termination: Sendable, Hashable {
        case exited(Int32)
        case signalled(Int32)

        /// Decodes a status from `waitpid`: WIFSIGNALED, WTERMSIG and WEXITSTATUS, which Swift
        /// does not import (they are macros).
        public init(waitStatus status: Int32) {
            let signal = status & 0x7f
            self = signal != 0 && signal != 0x7f ? .signalled(signal) : .exited((status >> 8) & 0xff)
        }
    }

    public let pid: pid_t
    /// Writes to the child's standard input.
    public let input: Int32
    /// Reads the child's standard output (the same descriptor as `input` with `socket`).
    public let output: Int32
    /// Reads the child's standard error.
    public let errors: Int32

    /// Starts `executable` with `arguments` (not counting argv[0]) and the environment
    /// `environment` ("NAME=value" entries).
    ///
    /// - Parameter socket: the child's standard input and output are one end of a Unix socket
    ///   pair, whose other end is `input` and `output`, so that descriptors can be passed along
    ///   it; otherwise they are two pipes.
    public init(
        executable: String, arguments: [String], environment: [String], socket: Bool = false
    ) throws(SpawnError) {
        let streams = try StandardStreams(socket: socket)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copies; every other descriptor is closed in the child
        // (`spawn`).
        for (descriptor, standard) in zip(streams.theirs, [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO]) {
            posix_spawn_file_actions_adddup2(&actions, descriptor, standard)
        }
        let pid: pid_t
        do {
            pid = try Self.spawn(executable, arguments: arguments, environment: environment, actions: &actions)
        } catch {
            streams.closeTheirs()
            streams.closeOurs()
            throw error
        }
        streams.closeTheirs()
        self.pid = pid
        input = streams.input
        output = streams.output
        errors = streams.errors
    }

    /// Waits for the child to end and reaps it; call once.
    public func waitForExit() -> Termination {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return Termination(waitStatus: status)
    }

    /// Starts `executable` with `arguments` (not counting argv[0]), the environment `environment`
    /// ("NAME=value" entries) and the file `actions`, with a clean signal mask and default
    /// handlers: the parent's blocked and ignored signals (its signal handling, SIGPIPE) stay out
    /// of the child. With `ownProcessGroup`, the child leads a process group of its own, which
    /// keeps terminal signals away from it.
    ///
    /// The child starts with its standard input, output and error alone: after `actions`, every
    /// descriptor above them is closed, whether or not it was opened close-on-exec. The daemon's
    /// libraries (SwiftNIO's epoll descriptor, listening sockets and accepted connections, among
    /// others) do not open theirs close-on-exec, and a child must not hold them.
    public static func spawn(
        _ executable: String, arguments: [String], environment: [String],
        actions: inout posix_spawn_file_actions_t, ownProcessGroup: Bool = false
    ) throws(SpawnError) -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let closing = speakd_spawn_close_from(&actions, STDERR_FILENO + 1)
        guard closing == 0 else {
            throw SpawnError(operation: "posix_spawn_file_actions_addclosefrom_np", code: closing)
        }
        var pid = pid_t()
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard status == 0 else { throw SpawnError(operation: "posix_spawn \(executable)", code: status) }
        return pid
    }
}

/// A process that could not be started.
public struct SpawnError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let code: Int32
    public var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
