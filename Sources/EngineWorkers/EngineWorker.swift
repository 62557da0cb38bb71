import Dispatch
import EspeakEngine
import FoundationEssentials
import Logging
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// One `speakd-engine-worker` process, seen from the daemon: its pipes, the job it renders, and a
/// thread of its own that reads its frames with blocking reads (never on Swift's cooperative pool).
final class EngineWorker: Sendable {
    /// What the worker tells its pool.
    struct Callbacks: Sendable {
        /// The worker sent `ready` with its sample rate.
        var ready: @Sendable (EngineWorker, Int) -> Void
        /// The worker finished its job and can take another.
        var idle: @Sendable (EngineWorker) -> Void
        /// The worker is gone; `error` is why, its job (if any) has been failed with it.
        var died: @Sendable (EngineWorker, EngineWorkerError, Job?) -> Void
        /// The worker died with its template before its job produced anything: the job did not
        /// fail, and belongs on another worker.
        var requeue: @Sendable (Job) -> Void
    }

    private struct State {
        var job: Job?
        var lastFrame = ContinuousClock.now
        var stalled: Double?
        /// Set by the reader, under the lock, once the process is gone: no job may start after.
        var dead = false
        /// Whether it was ever given a job: one that dies before has not started properly, and
        /// its slot's replacement waits (`RestartBackoff`).
        var tookJob = false
    }

    let process: WorkerProcess
    /// The worker's standard input, -1 once closed; writes to it are serialised here (a job and
    /// a cancel may come from two tasks), and it is never written after it was closed.
    private let input: Mutex<Int32>
    private let state = Mutex(State())

    /// The worker's standard error, split into lines for the log.
    private let diagnostics: WorkerDiagnostics

    /// Takes over the running worker `process`: its frames are handled by `callbacks`, its
    /// standard error goes to `logger`.
    init(process: WorkerProcess, callbacks: Callbacks, logger: Logger) {
        let diagnostics = WorkerDiagnostics(logger: logger)
        self.diagnostics = diagnostics
        // Standard error is read with blocking reads on a thread of its own until the worker is gone.
        DetachedThread.start(name: "speakd-worker-stderr") {
            diagnostics.read(process.errors)
            close(process.errors)
        }
        self.process = process
        self.input = Mutex(process.input)
        DetachedThread.start(name: "speakd-worker-\(process.pid)") { [self] in readFrames(callbacks) }
    }

    var pid: Int32 { process.pid }

    /// The last line the worker wrote to standard error (glibc's "stack smashing detected", say).
    var lastDiagnostic: String? { diagnostics.lastLine }

    /// Whether the worker has a job.
    var isRendering: Bool { state.withLock { $0.job != nil } }

    /// Whether the worker was ever given a job.
    var tookJob: Bool { state.withLock { $0.tookJob } }

    /// Whether its process is gone: its reader saw the end, and may still be waiting for the
    /// template to say how it ended before the pool forgets it.
    var isDead: Bool { state.withLock { $0.dead } }

    /// Sends `job` to the worker. False if the worker had already died (after the pool handed it
    /// out, before this call): the job was not taken and belongs on another worker. Once this
    /// returns true the job ends through this worker, with its frames or with its death.
    func start(_ job: Job) -> Bool {
        let taken = state.withLock { state -> Bool in
            guard !state.dead else { return false }
            state.job = job
            state.tookJob = true
            state.lastFrame = .now
            return true
        }
        guard taken else { return false }
        guard job.assign(to: self) else {
            // Cancelled while waiting for a worker: the worker answers the cancel with `done`.
            send(.job(WorkerJob(job.input, chunking: job.chunking)))
            send(.cancel)
            return true
        }
        send(.job(WorkerJob(job.input, chunking: job.chunking)))
        return true
    }

    /// Aborts `job` if it is still this worker's; its `done` frees the worker.
    ///
    /// The cancel is written while the job is known to be current: the reader clears the job
    /// under the same lock before the worker can be given another, so a cancel always reaches
    /// the pipe before the next job and can never abort it.
    func cancel(_ job: Job) {
        state.withLock { state in
            if state.job === job { send(.cancel) }
        }
    }

    /// Kills the worker if it has sent nothing for `limit` while rendering. A worker held back
    /// because its listener is far behind (`Launch.maxSamplesAhead`) is not stalled.
    func killIfStalled(limit: Duration) {
        let stalled = state.withLock { state -> Bool in
            guard let job = state.job, let since = job.silentSince(lastFrame: state.lastFrame),
                ContinuousClock.now - since > limit
            else {
                return false
            }
            state.stalled = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            return true
        }
        if stalled { kill(pid, SIGKILL) }
    }

    /// Ends the worker: closing its input makes it exit.
    func stop() {
        closeInput()
    }

    private func closeInput() {
        input.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }

    private func send(_ frame: WorkerFrame) {
        input.withLock { descriptor in
            // A dead worker's pipe fails with EPIPE (SIGPIPE is ignored); its reader reports the death.
            if descriptor >= 0 { try? frame.write(to: descriptor) }
        }
    }

    private func readFrames(_ callbacks: Callbacks) {
        // Events arrive just before the samples they belong with.
        var events: [EngineEvent] = []
        while true {
            let frame: WorkerFrame?
            do {
                frame = try WorkerFrame.read(from: process.output)
            } catch {
                kill(pid, SIGKILL)
                frame = nil
            }
            switch frame {
            case .ready(let sampleRate, _)?:
                // How the worker is confined is what its template reported.
                callbacks.ready(self, sampleRate)
            case .pcm(let samples)?:
                let job = state.withLock { state -> Job? in
                    state.lastFrame = .now
                    return state.job
                }
                job?.yield(PCMChunk(samples: samples, events: events))
                // The yield may have waited for the listener: the worker was held back, not silent.
                state.withLock { $0.lastFrame = .now }
                events = []
            case .events(let reported)?:
                events = reported
            case .done?, .failure?:
                events = []
                let job = state.withLock { state -> Job? in
                    defer { state.job = nil }
                    return state.job
                }
                if case .failure(let message)? = frame {
                    job?.finish(throwing: EngineWorkerError.failed(message))
                } else {
                    job?.finish()
                }
                callbacks.idle(self)
            case nil, .job?, .cancel?, .forked?, .exited?:
                // Dead from here: a job handed to it while its template says how it ended (which
                // a stopped template may never do) is not taken, and goes to another worker.
                let (job, stalled) = state.withLock { state in
                    defer {
                        state.job = nil
                        state.dead = true
                    }
                    return (state.job, state.stalled)
                }
                let exit = process.waitForExit()
                let error: EngineWorkerError
                if let stalled {
                    error = .stalled(seconds: stalled)
                } else {
                    switch exit {
                    case .templateGone: error = .crashed(signal: SIGKILL)
                    case .ended(.signalled(let signal)): error = .crashed(signal: signal)
                    case .ended(.exited(let status)): error = .exited(status: status)
                    case .unknown(let limit): error = .ended(unreportedAfter: limit)
                    }
                }
                // Killed because its template died, not by its job: a job that has produced
                // nothing yet is given to another worker (up to `Job.requeueLimit` times), not failed.
                let orphaned = exit == .templateGone && stalled == nil ? job?.takeForRequeue() : nil
                if orphaned == nil { job?.finish(throwing: error) }
                closeInput()
                close(process.output)
                callbacks.died(self, error, orphaned == nil ? job : nil)
                if let orphaned { callbacks.requeue(orphaned) }
                return
            }
        }
    }
}

/// One render: what the worker is sent, the stream it feeds, and the worker it was given, so a
/// cancel reaches it.
///
/// The stream is bounded: once `maxSamplesAhead` samples wait unread, `yield` holds the worker's
/// reader until the listener has taken half of them (`consumed`) or the job is cancelled. The
/// worker then blocks on its full pipe, so a long text (a page, a 32,767-character SSIP message)
/// costs the audio of a few seconds ahead of the listener, not that of the whole text, and
/// renders as it is heard.
final class Job: Sendable {
    let text: String
    let input: EspeakInput
    let chunking: RenderChunking
    private let continuation: AsyncThrowingStream<PCMChunk, any Error>.Continuation
    private struct State {
        var worker: EngineWorker?
        var cancelled = false
        var yielded = false
        var requeued = 0
        /// Samples yielded and not yet taken by the listener.
        var unconsumed = 0
        /// The reader waits on `room` for the listener.
        var heldBack = false
        /// When the reader was last let go after waiting: the worker's silence counts from then.
        var released: ContinuousClock.Instant?
    }
    private let state = Mutex(State())
    private let room = DispatchSemaphore(value: 0)
    /// `EngineWorkerPool.Launch.maxSamplesAhead`.
    private let maxSamplesAhead: Int

    init(
        text: String, input: EspeakInput, chunking: RenderChunking, maxSamplesAhead: Int,
        continuation: AsyncThrowingStream<PCMChunk, any Error>.Continuation
    ) {
        self.text = text
        self.input = input
        self.chunking = chunking
        self.maxSamplesAhead = maxSamplesAhead
        self.continuation = continuation
    }

    /// How often a job may move to another worker. A template that dies takes every worker it
    /// forked with it, and the pool may hand the job to a second one of them before it learns
    /// that that one is dying too; a template that keeps dying fails the job in the end.
    static let requeueLimit = 3

    /// Self, when the job may go to another worker: nothing was yielded, it was not cancelled and
    /// it has not been requeued `requeueLimit` times. Counts the requeue.
    func takeForRequeue() -> Job? {
        state.withLock { state in
            guard !state.yielded, !state.cancelled, state.requeued < Self.requeueLimit else { return nil }
            state.requeued += 1
            state.worker = nil
            return self
        }
    }

    /// Records the worker; false if the job was cancelled before it got one.
    func assign(to worker: EngineWorker) -> Bool {
        state.withLock {
            $0.worker = worker
            return !$0.cancelled
        }
    }

    /// The consumer went away: abort the render wherever it is.
    func cancel() {
        let (worker, release) = state.withLock { state -> (EngineWorker?, Bool) in
            state.cancelled = true
            defer {
                if state.heldBack { state.released = .now }
                state.heldBack = false
            }
            return (state.worker, state.heldBack)
        }
        // A reader held back goes on reading, so the worker sees the cancel and says `done`.
        if release { room.signal() }
        worker?.cancel(self)
    }

    /// Since when the worker has been silent for this job, given its last frame: nil while the
    /// reader waits for the listener (the worker is held back, not stalled), and never before it
    /// was last let go, so the moment between a release and the reader's next frame is not
    /// counted as silence.
    func silentSince(lastFrame: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        state.withLock { state in
            guard !state.heldBack else { return nil }
            return max(lastFrame, state.released ?? lastFrame)
        }
    }

    /// Hands `chunk` to the listener; waits (on the reader's own thread) while the listener is
    /// `maxSamplesAhead` behind.
    func yield(_ chunk: PCMChunk) {
        let wait = state.withLock { state -> Bool in
            state.yielded = true
            state.unconsumed += chunk.samples.count
            state.heldBack = !state.cancelled && state.unconsumed > maxSamplesAhead
            return state.heldBack
        }
        continuation.yield(chunk)
        if wait { room.wait() }
    }

    /// The listener took `samples` samples; releases a held-back reader once half the bound is free.
    func consumed(_ samples: Int) {
        let release = state.withLock { state -> Bool in
            state.unconsumed -= samples
            guard state.heldBack, state.unconsumed <= maxSamplesAhead / 2 else { return false }
            state.heldBack = false
            state.released = .now
            return true
        }
        if release { room.signal() }
    }
    func finish() { continuation.finish() }
    func finish(throwing error: any Error) { continuation.finish(throwing: error) }
}

/// A worker's standard error, line by line: its own messages (`speakd-engine-worker: …` and its
/// logger's lines) are logged at warning; anything else (what libespeak-ng itself prints) is
/// logged at debug. The worker links libespeak-ng without its audio library (`CNoAudioDevice`),
/// so no sound-server client runs inside the sandbox.
final class WorkerDiagnostics: Sendable {
    private let logger: Logger
    private struct State {
        var partial: [UInt8] = []
        var lastLine: String?
    }
    private let state = Mutex(State())

    init(logger: Logger) {
        self.logger = logger
    }

    var lastLine: String? { state.withLock { $0.lastLine } }

    /// Reads `descriptor` with blocking reads until it ends, line by line into the log.
    func read(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return }
            received(buffer[..<count])
        }
    }

    func received(_ data: ArraySlice<UInt8>) {
        let lines = state.withLock { state -> [String] in
            state.partial.append(contentsOf: data)
            var lines: [String] = []
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self)
                state.partial.removeSubrange(state.partial.startIndex...newline)
                if !line.isEmpty { lines.append(line) }
            }
            // A line longer than 4 kB is logged in pieces rather than held without bound.
            if state.partial.count > 4096 {
                lines.append(String(decoding: state.partial, as: UTF8.self))
                state.partial.removeAll()
            }
            if let last = lines.last { state.lastLine = last }
            return lines
        }
        for line in lines {
            if line.contains("speakd-engine-worker") || line.contains("speakd.engine-worker") {
                logger.warning("engine worker: \(line)")
            } else {
                logger.debug("engine worker library output", metadata: ["engine.worker.stderr": "\(line)"])
            }
        }
    }
}
