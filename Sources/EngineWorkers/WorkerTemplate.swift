import CPosixSupport
import FoundationEssentials
import Logging
import PosixSupport
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// The `speakd-engine-worker` template, seen from the daemon: the one process the daemon starts
/// with `posix_spawn`, which initialises espeak-ng inside the sandbox and then forks every worker
/// (see `EngineWorkerMain`). Its standard input and output are a Unix socket: a fork request is a
/// byte with the new worker's three pipe ends attached; the template answers `forked` with the
/// worker's process id, and `exited` with its status when it ends (the workers are its children).
///
/// A thread of its own reads the template's answers with blocking reads.
///
/// Every wait on the template has a time limit: a template that is stopped (SIGSTOP) or hung
/// answers nothing, and the pool must learn that rather than wait with it. A request given up
/// on keeps its place in the queue of answers, so a template that resumes (SIGCONT) answers the
/// later ones in order; the worker it then forks for the abandoned request finds its pipes
/// closed and exits.
final class WorkerTemplate: @unchecked Sendable {
    // @unchecked Sendable: `state` is only touched with `condition` locked.
    private struct State {
        var ready: Result<(sampleRate: Int, sandbox: String), EngineWorkerError>?
        var readyWaiter: CheckedContinuation<(sampleRate: Int, sandbox: String), any Error>?
        /// Fork requests sent and not yet answered, oldest first.
        var forks: [ForkRequest] = []
        var exits: [Int32: SpawnedProcess.Termination] = [:]
        /// When each wait for a worker's end began, by worker, until the template reports it
        /// (a wait that timed out stays: the template has still not answered).
        var exitWaits: [Int32: ContinuousClock.Instant] = [:]
        /// Workers whose end nobody waits for any more (their wait timed out, or their fork was
        /// given up on): their `exited` is dropped when it comes.
        var abandonedExits: Set<Int32> = []
        /// Why the template is gone, once it is.
        var gone: EngineWorkerError?
    }

    /// A fork request: when it was sent, and who waits for its answer (nil once answered or given up).
    // @unchecked Sendable: `continuation` is only touched with the template's `condition` locked.
    private final class ForkRequest: @unchecked Sendable {
        let sent = ContinuousClock.now
        var continuation: CheckedContinuation<Int32, any Error>?
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
        let diagnostics = WorkerDiagnostics.engineWorker(logger: logger)
        self.diagnostics = diagnostics
        diagnostics.start(reading: process.errors, thread: "speakd-template-err")
        DetachedThread.start(name: "speakd-template") { [self] in readAnswers(logger: logger) }
    }

    var pid: Int32 { process.pid }

    /// Waits for the template's `ready`: the engine's sample rate and how it is confined.
    ///
    /// - Throws: `EngineWorkerError.unavailable` when the template ended first, or said nothing
    ///   for `limit` (the caller then kills it).
    func ready(limit: Duration) async throws -> (sampleRate: Int, sandbox: String) {
        try await withCheckedThrowingContinuation { continuation in
            condition.lock()
            defer { condition.unlock() }
            if let ready = state.ready {
                continuation.resume(with: ready.mapError { $0 })
                return
            }
            state.readyWaiter = continuation
            Task { [weak self] in
                try? await Task.sleep(for: limit)
                self?.giveUpReady(after: limit)
            }
        }
    }

    private func giveUpReady(after limit: Duration) {
        condition.lock()
        let waiter = state.readyWaiter
        state.readyWaiter = nil
        condition.unlock()
        waiter?.resume(throwing: EngineWorkerError.unavailable("the worker template was not ready within \(limit)"))
    }

    /// Since when the template has left a request unanswered (a fork, or a worker's end that a
    /// worker's reader waits for); nil when it has answered everything asked of it.
    var unansweredSince: ContinuousClock.Instant? {
        condition.lock()
        defer { condition.unlock() }
        guard state.gone == nil else { return nil }
        return ([state.forks.first?.sent] + state.exitWaits.values.map { $0 }).compactMap { $0 }.min()
    }

    /// Whether the template is still there to fork workers.
    var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state.gone == nil
    }

    /// Forks a worker whose standard input, output and error are `streams.theirs` (which the
    /// caller closes afterwards, and closes its own ends of when this throws) and returns its
    /// process id.
    ///
    /// - Throws: `EngineWorkerError.unavailable` naming the reason when the template is gone, the
    ///   fork failed, or the template did not answer within `limit`.
    func fork(_ streams: StandardStreams, limit: Duration) async throws -> Int32 {
        let request = ForkRequest()
        return try await withCheckedThrowingContinuation { continuation in
            condition.lock()
            defer { condition.unlock() }
            if let gone = state.gone {
                continuation.resume(throwing: gone)
                return
            }
            // Sent under the lock: the answers come in the order of `forks`. A stopped template
            // reads nothing, but a request is a byte and three descriptors: the socket's buffer
            // holds far more than the pool sends before it replaces the template.
            guard speakd_send_descriptors(process.input, streams.theirs, Int32(streams.theirs.count)) == 0 else {
                continuation.resume(
                    throwing: EngineWorkerError.unavailable(
                        "the worker template cannot be reached: \(String(cString: strerror(errno)))"))
                return
            }
            request.continuation = continuation
            state.forks.append(request)
            Task { [weak self] in
                try? await Task.sleep(for: limit)
                self?.giveUp(request, after: limit)
            }
        }
    }

    /// Fails `request` if it is still unanswered; it keeps its place among the answers to come.
    private func giveUp(_ request: ForkRequest, after limit: Duration) {
        condition.lock()
        let continuation = request.continuation
        request.continuation = nil
        condition.unlock()
        continuation?.resume(
            throwing: EngineWorkerError.unavailable("the worker template did not answer a fork request within \(limit)")
        )
    }

    /// Blocks until the template reports how worker `pid` ended, for at most `limit`.
    func waitForExit(_ pid: Int32, limit: Duration) -> WorkerExit {
        let deadline = ConditionLock.deadline(in: limit)
        condition.lock()
        defer { condition.unlock() }
        if let termination = state.exits.removeValue(forKey: pid) { return .ended(termination) }
        if state.gone != nil { return .templateGone }
        state.exitWaits[pid] = .now
        while state.exits[pid] == nil && state.gone == nil {
            if !condition.wait(until: deadline) && state.exits[pid] == nil && state.gone == nil {
                // Still unanswered (`exitWaits` keeps it so); the answer is dropped when it comes.
                state.abandonedExits.insert(pid)
                return .unknown(after: limit)
            }
        }
        state.exitWaits[pid] = nil
        return state.exits.removeValue(forKey: pid).map(WorkerExit.ended) ?? .templateGone
    }

    /// Ends the template: closing its control socket makes it exit, and its workers with it.
    func stop() {
        shutdown(process.input, Int32(SHUT_RDWR))
    }

    /// Kills the template, which takes its workers with it: for one that stopped answering,
    /// which may not read its socket to learn it should end.
    func killProcess() {
        Glibc.kill(process.pid, SIGKILL)
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
                if !state.forks.isEmpty {
                    let request = state.forks.removeFirst()
                    if let continuation = request.continuation {
                        request.continuation = nil
                        continuation.resume(returning: pid)
                    } else {
                        // Given up on: its pipes are closed, so the worker exits at once.
                        state.abandonedExits.insert(pid)
                    }
                }
            case .failure(let message)?:
                if !state.forks.isEmpty {
                    let request = state.forks.removeFirst()
                    request.continuation?.resume(throwing: EngineWorkerError.unavailable(message))
                    request.continuation = nil
                }
            case .exited(let pid, let status)?:
                if state.abandonedExits.remove(pid) != nil {
                    state.exitWaits[pid] = nil
                } else {
                    state.exits[pid] = SpawnedProcess.Termination(waitStatus: status)
                }
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
        let forks = state.forks.compactMap(\.continuation)
        for request in state.forks { request.continuation = nil }
        state.forks = []
        condition.broadcast()
        condition.unlock()
        for fork in forks { fork.resume(throwing: reason) }
        close(process.input)
    }
}
