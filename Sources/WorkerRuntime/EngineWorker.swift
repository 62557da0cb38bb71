import Dispatch
import FoundationEssentials
import Logging
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One engine worker process, seen from the daemon, whatever its engine (a `speakd-engine-worker`
/// forked by its template, a Piper worker the daemon spawned): its pipes, the job it renders, and a
/// thread of its own that reads its frames (`WorkerFrame`) with blocking reads, never on Swift's
/// cooperative pool. Its owner (`EngineWorkerPool`, a Piper voice's slot) decides which job it
/// takes next and what replaces it when it dies.
package final class EngineWorker: Sendable {
    /// What the worker tells its pool.
    package struct Callbacks: Sendable {
        /// The worker sent `ready` with its sample rate and how it is confined.
        var ready: @Sendable (EngineWorker, Int, String) -> Void
        /// The worker finished its job and can take another.
        var idle: @Sendable (EngineWorker) -> Void
        /// The worker is gone; `error` is why, its job (if any) has been failed with it.
        var died: @Sendable (EngineWorker, EngineWorkerError, RenderJob?) -> Void
        /// The worker died with its template before its job produced anything: the job did not
        /// fail, and belongs on another worker.
        var requeue: @Sendable (RenderJob) -> Void

        /// - Parameters: see the properties of the same names.
        package init(
            ready: @escaping @Sendable (EngineWorker, Int, String) -> Void,
            idle: @escaping @Sendable (EngineWorker) -> Void,
            died: @escaping @Sendable (EngineWorker, EngineWorkerError, RenderJob?) -> Void,
            requeue: @escaping @Sendable (RenderJob) -> Void
        ) {
            self.ready = ready
            self.idle = idle
            self.died = died
            self.requeue = requeue
        }
    }

    private struct State {
        var job: RenderJob?
        var lastFrame = ContinuousClock.now
        var stalled: Double?
        /// Set by the reader, under the lock, once the process is gone: no job may start after.
        var dead = false
        /// Whether it was ever given a job: one that dies before has not started properly, and
        /// its slot's replacement waits (`RestartBackoff`).
        var tookJob = false
    }

    package let process: WorkerProcess
    /// The worker's standard input, -1 once closed; writes to it are serialised here (a job and
    /// a cancel may come from two tasks), and it is never written after it was closed.
    private let input: Mutex<Int32>
    private let state = Mutex(State())

    /// The worker's standard error, split into lines for the log.
    private let diagnostics: WorkerDiagnostics

    /// Takes over the running worker `process`: its frames are handled by `callbacks`, its
    /// standard error by `diagnostics`.
    package init(process: WorkerProcess, callbacks: Callbacks, diagnostics: WorkerDiagnostics) {
        self.diagnostics = diagnostics
        // Standard error is read with blocking reads on a thread of its own until the worker is gone.
        diagnostics.start(reading: process.errors, thread: "speakd-worker-stderr")
        self.process = process
        self.input = Mutex(process.input)
        DetachedThread.start(name: "speakd-worker-\(process.pid)") { [self] in readFrames(callbacks) }
    }

    package var pid: Int32 { process.pid }

    /// The last line the worker wrote to standard error (glibc's "stack smashing detected", say).
    package var lastDiagnostic: String? { diagnostics.lastLine }

    /// Whether the worker has a job.
    package var isRendering: Bool { state.withLock { $0.job != nil } }

    /// Whether the worker was ever given a job.
    package var tookJob: Bool { state.withLock { $0.tookJob } }

    /// Whether its process is gone: its reader saw the end, and may still be waiting for the
    /// template to say how it ended before the pool forgets it.
    package var isDead: Bool { state.withLock { $0.dead } }

    /// Sends `job` to the worker. False if the worker had already died (after the pool handed it
    /// out, before this call): the job was not taken and belongs on another worker. Once this
    /// returns true the job ends through this worker, with its frames or with its death.
    package func start(_ job: RenderJob) -> Bool {
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
            send(.job(job.work))
            send(.cancel)
            return true
        }
        send(.job(job.work))
        return true
    }

    /// Aborts `job` if it is still this worker's; its `done` frees the worker.
    ///
    /// The cancel is written while the job is known to be current: the reader clears the job
    /// under the same lock before the worker can be given another, so a cancel always reaches
    /// the pipe before the next job and can never abort it.
    func cancel(_ job: RenderJob) {
        state.withLock { state in
            if state.job === job { send(.cancel) }
        }
    }

    /// Kills the worker if it has sent nothing for `limit` while rendering. A worker held back
    /// because its listener is far behind (its job's `maxSamplesAhead`) is not stalled.
    package func killIfStalled(limit: Duration) {
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
    package func stop() {
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
            case .ready(let sampleRate, let sandbox)?:
                callbacks.ready(self, sampleRate, sandbox)
            case .pcm(let samples)?:
                let job = state.withLock { state -> RenderJob? in
                    state.lastFrame = .now
                    return state.job
                }
                job?.yield(PCMChunk(samples: samples, events: events))
                // The yield may have waited for the listener: the worker was held back, not silent.
                state.withLock { $0.lastFrame = .now }
                events = []
            case .events(let reported)?:
                // A worker that reports words is not silent (a Piper worker sends a sentence's
                // events before its first samples).
                state.withLock { $0.lastFrame = .now }
                events = reported
            case .done?, .failure?:
                events = []
                let job = state.withLock { state -> RenderJob? in
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
package final class RenderJob: Sendable {
    /// The text, for a log line when its worker dies ("(private)" for a private announcement).
    package let text: String
    /// What the worker is sent.
    package let work: WorkerJob
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
    /// How many samples may wait unread before the worker's reader is held back.
    private let maxSamplesAhead: Int

    /// A job and the stream it feeds, bounded as `maxSamplesAhead` says; see `stream(text:work:maxSamplesAhead:)`.
    private init(
        text: String, work: WorkerJob, maxSamplesAhead: Int,
        continuation: AsyncThrowingStream<PCMChunk, any Error>.Continuation
    ) {
        self.text = text
        self.work = work
        self.maxSamplesAhead = max(1, maxSamplesAhead)
        self.continuation = continuation
    }

    /// A job and the stream its listener reads. What the listener takes is counted, so the job
    /// renders no further ahead than `maxSamplesAhead`; cancelling the listener's task, or
    /// dropping the stream, cancels the job wherever it is.
    package static func stream(
        text: String, work: WorkerJob, maxSamplesAhead: Int
    ) -> (job: RenderJob, stream: AsyncThrowingStream<PCMChunk, any Error>) {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: PCMChunk.self)
        let job = RenderJob(text: text, work: work, maxSamplesAhead: maxSamplesAhead, continuation: continuation)
        continuation.onTermination = { termination in
            if case .cancelled = termination { job.cancel() }
        }
        return (job, AsyncThrowingStream(pulling: stream.makeAsyncIterator()) { job.consumed($0.samples.count) })
    }

    /// How often a job may move to another worker. A template that dies takes every worker it
    /// forked with it, and the pool may hand the job to a second one of them before it learns
    /// that that one is dying too; a template that keeps dying fails the job in the end.
    package static let requeueLimit = 3

    /// Self, when the job may go to another worker: nothing was yielded, it was not cancelled and
    /// it has not been requeued `requeueLimit` times. Counts the requeue.
    func takeForRequeue() -> RenderJob? {
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

    /// Whether the job was cancelled (its listener went away).
    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The consumer went away: abort the render wherever it is.
    package func cancel() {
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
    package func finish() { continuation.finish() }
    package func finish(throwing error: any Error) { continuation.finish(throwing: error) }
}
