import CPosixSupport
import FoundationEssentials
import Logging
import PosixSupport

#if canImport(Glibc)
import Glibc
#endif

/// A worker process as the pool holds it: its process id, the daemon's ends of its pipes, and
/// how to learn how it ended.
struct WorkerProcess: Sendable {
    let pid: Int32
    /// Writes to the worker's standard input.
    let input: Int32
    /// Reads the worker's standard output.
    let output: Int32
    /// Reads the worker's standard error.
    let errors: Int32
    /// Blocks until the worker has ended and says how; called once, after its output ended. Nil
    /// when its template ended first, which killed it (`PR_SET_PDEATHSIG`).
    let waitForExit: @Sendable () -> SpawnedProcess.Termination?
}

/// The `speakd-engine-worker` template, seen from the daemon: the one process the daemon starts
/// with `posix_spawn`, which initialises espeak-ng inside the sandbox and then forks every worker
/// (see `EngineWorkerMain`). Its standard input and output are a Unix socket: a fork request is a
/// byte with the new worker's three pipe ends attached; the template answers `forked` with the
/// worker's process id, and `exited` with its status when it ends (the workers are its children).
///
/// A thread of its own reads the template's answers with blocking reads.
final class WorkerTemplate: @unchecked Sendable {
    // @unchecked Sendable: `state` is only touched with `condition` locked.
    private struct State {
        var ready: Result<(sampleRate: Int, sandbox: String), EngineWorkerError>?
        var readyWaiter: CheckedContinuation<(sampleRate: Int, sandbox: String), any Error>?
        /// Fork requests sent and not yet answered, oldest first.
        var forks: [CheckedContinuation<Int32, any Error>] = []
        var exits: [Int32: SpawnedProcess.Termination] = [:]
        /// Why the template is gone, once it is.
        var gone: EngineWorkerError?
    }

    private let process: SpawnedProcess
    private let condition = ConditionLock()
    private var state = State()
    private let diagnostics: WorkerDiagnostics

    /// Starts the template: `executable` with `arguments` (`--data DIR`, `--voice NAME`).
    init(executable: String, arguments: [String], logger: Logger) throws {
        // A crashing worker cannot start the Swift runtime's backtracer (its sandbox forbids exec),
        // and should not try: the daemon reports the signal and logs the text.
        let process = try SpawnedProcess(
            executable: executable, arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
                .map { "\($0.key)=\($0.value)" },
            socket: true)
        self.process = process
        let diagnostics = WorkerDiagnostics(logger: logger)
        self.diagnostics = diagnostics
        DetachedThread.start(name: "speakd-template-err") {
            diagnostics.read(process.errors)
            close(process.errors)
        }
        DetachedThread.start(name: "speakd-template") { [self] in readAnswers(logger: logger) }
    }

    var pid: Int32 { process.pid }

    /// Waits for the template's `ready`: the engine's sample rate and how it is confined.
    ///
    /// - Throws: `EngineWorkerError.unavailable` when the template ended first.
    func ready() async throws -> (sampleRate: Int, sandbox: String) {
        try await withCheckedThrowingContinuation { continuation in
            condition.lock()
            defer { condition.unlock() }
            if let ready = state.ready {
                continuation.resume(with: ready.mapError { $0 })
            } else {
                state.readyWaiter = continuation
            }
        }
    }

    /// Whether the template is still there to fork workers.
    var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state.gone == nil
    }

    /// Forks a worker whose standard input, output and error are `streams.theirs` (which the
    /// caller closes afterwards) and returns its process id.
    ///
    /// - Throws: `EngineWorkerError.unavailable` naming the reason when the template is gone or
    ///   the fork failed.
    func fork(_ streams: StandardStreams) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            condition.lock()
            defer { condition.unlock() }
            if let gone = state.gone {
                continuation.resume(throwing: gone)
                return
            }
            // Sent under the lock: the answers come in the order of `forks`.
            guard speakd_send_descriptors(process.input, streams.theirs, Int32(streams.theirs.count)) == 0 else {
                continuation.resume(
                    throwing: EngineWorkerError.unavailable(
                        "the worker template cannot be reached: \(String(cString: strerror(errno)))"))
                return
            }
            state.forks.append(continuation)
        }
    }

    /// Blocks until the template reports how worker `pid` ended; nil when the template is gone
    /// first, having taken its workers with it (they die with SIGKILL when it does).
    func waitForExit(_ pid: Int32) -> SpawnedProcess.Termination? {
        condition.lock()
        defer { condition.unlock() }
        while state.exits[pid] == nil && state.gone == nil { condition.wait() }
        return state.exits.removeValue(forKey: pid)
    }

    /// Ends the template: closing its control socket makes it exit, and its workers with it.
    func stop() {
        shutdown(process.input, Int32(SHUT_RDWR))
    }

    private func readAnswers(logger: Logger) {
        var failure: EngineWorkerError?
        while failure == nil {
            let frame: WorkerFrame?
            do {
                frame = try WorkerFrame.read(from: process.output)
            } catch {
                kill(pid, SIGKILL)
                failure = .unavailable("the worker template sent \(error)")
                break
            }
            condition.lock()
            switch frame {
            case .ready(let sampleRate, let sandbox)?:
                let ready = (sampleRate: sampleRate, sandbox: sandbox)
                state.ready = .success(ready)
                state.readyWaiter?.resume(returning: ready)
                state.readyWaiter = nil
            case .forked(let pid)?:
                if !state.forks.isEmpty { state.forks.removeFirst().resume(returning: pid) }
            case .failure(let message)?:
                if !state.forks.isEmpty {
                    state.forks.removeFirst().resume(throwing: EngineWorkerError.unavailable(message))
                }
            case .exited(let pid, let status)?:
                state.exits[pid] = SpawnedProcess.Termination(waitStatus: status)
                condition.broadcast()
            case nil:
                failure = .unavailable("the worker template ended")
            case let frame?:
                kill(pid, SIGKILL)
                failure = .unavailable("the worker template sent an unexpected \(frame)")
            }
            condition.unlock()
        }
        let termination = process.waitForExit()
        // What it printed last says why, when it has been read by now ("cannot enter the sandbox: …").
        let said = diagnostics.lastLine.map { " (\($0))" } ?? ""
        let reason: EngineWorkerError =
            switch termination {
            case .signalled(let signal):
                .unavailable("the worker template was killed by \(EngineWorkerError.signalName(signal))\(said)")
            case .exited(0): failure ?? .unavailable("the worker template ended")
            case .exited(let status): .unavailable("the worker template exited with status \(status)\(said)")
            }
        logger.debug("engine worker template ended", metadata: ["engine.error": "\(reason)"])
        condition.lock()
        state.gone = reason
        if state.ready == nil {
            state.ready = .failure(reason)
            state.readyWaiter?.resume(throwing: reason)
            state.readyWaiter = nil
        }
        let forks = state.forks
        state.forks = []
        condition.broadcast()
        condition.unlock()
        for fork in forks { fork.resume(throwing: reason) }
        close(process.input)
    }
}
