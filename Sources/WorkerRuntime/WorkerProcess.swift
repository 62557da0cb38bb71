import PosixSupport

/// A worker process as the daemon holds it, whatever its engine: its process id, the daemon's ends
/// of its pipes, and how to learn how it ended (from the template that forked it, or by reaping it).
public struct WorkerProcess: Sendable {
    public let pid: Int32
    /// Writes to the worker's standard input.
    public let input: Int32
    /// Reads the worker's standard output.
    public let output: Int32
    /// Reads the worker's standard error.
    public let errors: Int32
    /// Blocks until it is known how the worker ended (for a forked worker, for at most its
    /// template's time limit); called once, after its output ended.
    public let waitForExit: @Sendable () -> WorkerExit

    /// - Parameters: see the properties of the same names.
    public init(
        pid: Int32, input: Int32, output: Int32, errors: Int32, waitForExit: @escaping @Sendable () -> WorkerExit
    ) {
        self.pid = pid
        self.input = input
        self.output = output
        self.errors = errors
        self.waitForExit = waitForExit
    }

    /// A worker the daemon spawned itself (a Piper worker): it learns how it ended by reaping it.
    public init(spawned: SpawnedProcess) {
        self.init(
            pid: spawned.pid, input: spawned.input, output: spawned.output, errors: spawned.errors,
            waitForExit: { .ended(spawned.waitForExit()) })
    }
}

/// How a worker ended, as its template (or its reaping) reported it.
public enum WorkerExit: Sendable, Hashable {
    /// The template reported the worker's status.
    case ended(SpawnedProcess.Termination)
    /// The template ended first, which killed the worker (`PR_SET_PDEATHSIG`).
    case templateGone
    /// The template did not say within its time limit (it is stopped or hung).
    case unknown(after: Duration)
}
