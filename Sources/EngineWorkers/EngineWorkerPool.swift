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

/// Renders utterances in a pool of `speakd-engine-worker` processes, each owning one libespeak-ng.
///
/// A crafted text that crashes espeak-ng ends one worker and fails only its own job (the stream
/// throws `EngineWorkerError`, e.g. `engine worker crashed: SIGSEGV`); the pool starts a
/// replacement at once. Backoff is per worker slot and counts only failed starts (a replacement
/// that cannot start, or dies before taking a job), so texts that crash workers in a loop cost
/// their own requests and never delay everyone else's (`RestartBackoff`).
///
/// Every wait on the worker template has a time limit (`Launch.templateLimit`): a template that
/// stops answering (SIGSTOP, a hang) makes `status.problem` say so, and one that stays silent for
/// `Launch.templateRestartLimit` is killed and replaced. Jobs go to an idle worker, so two renders
/// run on two cores. Validation, compilation to espeak-ng's input, voice resolution and the voice
/// list come from an in-process `EspeakEngine` that never synthesises: the daemon checks and
/// compiles input before any worker sees it, and a worker is sent only the compiled input.
public final class EngineWorkerPool: SpeechRenderer {
    /// How the workers are started.
    public struct Launch: Sendable, Hashable {
        /// The `speakd-engine-worker` executable.
        public var executable: String
        /// Arguments after `--data DIR --voice NAME` (which the pool adds): none is needed, the
        /// daemon resolves voices and compiles; for a test that starts another worker.
        public var arguments: [String]
        /// How many workers run.
        public var count: Int
        /// A rendering worker that sends nothing for this long is killed.
        public var stallLimit: Duration
        /// How long the worker template may take to answer a fork request or report how a worker
        /// ended; past it the start fails (and is retried) and `status.problem` names the template.
        public var templateLimit: Duration
        /// A template that has left a request unanswered this long is killed and started again
        /// (which ends the workers it forked: renders that have produced nothing move to new ones).
        public var templateRestartLimit: Duration
        /// How long a new template may take to load espeak-ng and say it is ready.
        public var templateStartLimit: Duration
        /// The most samples a render runs ahead of its listener before its worker waits (by
        /// default 2^18, about 12 s at espeak-ng's 22,050 Hz: far more than any sink buffers, so
        /// playback never waits for it, and a 32,767-character text costs no more memory than a
        /// sentence). A test that holds a worker busy with nobody listening raises it.
        public var maxSamplesAhead: Int

        /// - Parameters: see the properties of the same names.
        public init(
            executable: String, arguments: [String], count: Int, stallLimit: Duration = .seconds(10),
            templateLimit: Duration = .seconds(2), templateRestartLimit: Duration = .seconds(8),
            templateStartLimit: Duration = .seconds(20), maxSamplesAhead: Int = 1 << 18
        ) {
            self.executable = executable
            self.arguments = arguments
            self.count = max(1, count)
            self.stallLimit = stallLimit
            self.templateLimit = templateLimit
            self.templateRestartLimit = templateRestartLimit
            self.templateStartLimit = templateStartLimit
            self.maxSamplesAhead = max(1, maxSamplesAhead)
        }

        /// `speakd-engine-worker` beside the running executable (`/proc/self/exe`), where the
        /// build puts it, else in `../libexec/speakd/` from it, where the Debian package puts it
        /// (`/usr/sbin/speakd` and `/usr/bin/speak` find `/usr/libexec/speakd/speakd-engine-worker`).
        public static func besideExecutable() -> String {
            let executable =
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
            let directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
            let beside = directory.appendingPathComponent("speakd-engine-worker").path
            let libexec = directory.deletingLastPathComponent()
                .appendingPathComponent("libexec/speakd/speakd-engine-worker").path
            return !FileManager.default.isExecutableFile(atPath: beside)
                && FileManager.default.isExecutableFile(atPath: libexec) ? libexec : beside
        }
    }

    /// What `/healthz` and `/metrics` show of the pool.
    public struct Status: Sendable, Hashable {
        /// Workers running now.
        public var running: Int
        /// Workers configured.
        public var configured: Int
        /// Workers started to replace one that died, since the pool started.
        public var restarts: Int
        /// How the workers are confined, as the last one to start reported it.
        public var sandbox: String?
        /// Why the pool cannot start workers now (its template does not answer, or starts
        /// fail), while it keeps trying; nil when it can.
        public var problem: String?
    }

    private struct State {
        var workers: [ObjectIdentifier: EngineWorker] = [:]
        var idle: [EngineWorker] = []
        /// Jobs that found no idle worker, oldest first: the next worker to become idle takes the
        /// first one itself, on its reader thread, without a hop through a task.
        var waiting: [RenderJob] = []
        var starting: [ObjectIdentifier: CheckedContinuation<Int, any Error>] = [:]
        /// Workers that said `ready` before `spawn` was waiting for it.
        var readyEarly: [ObjectIdentifier: Int] = [:]
        /// Workers that died before `spawn` was waiting for their `ready`.
        var diedEarly: [ObjectIdentifier: EngineWorkerError] = [:]
        var restarts = 0
        var sandbox: String?
        /// Each running worker's slot: its failed starts in a row.
        var backoff: [ObjectIdentifier: RestartBackoff] = [:]
        /// Why the last start of a worker failed, until one starts.
        var startFailure: String?
        /// Inputs that crashed a worker, by their hash, most recent last (at most `crashMemory`),
        /// with the error their render failed with.
        var crashedInputs: [Int: EngineWorkerError] = [:]
        var crashedOrder: [Int] = []
        var stopped = false
        /// Starts (or started) the template that forks the workers.
        var template: Task<WorkerTemplate, any Error>?
        /// The template `template` started, once it is ready.
        var readyTemplate: WorkerTemplate?
    }

    /// Validates, compiles, resolves voices and lists them; never renders.
    public let engine: EspeakEngine
    public var format: AudioFormat { engine.format }
    public var engineName: String { engine.engineName }
    /// espeak-ng, its version and data as the engine says them, and the worker executable (with
    /// the espeak-ng it links) among its files.
    public var engineIdentities: [EngineIdentity] {
        engine.engineIdentities.map { identity in
            var identity = identity
            identity.files.insert(launch.executable, at: 0)
            return identity
        }
    }
    public let launch: Launch
    private let logger: Logger
    private let state = Mutex(State())
    private let stallWatch: StallWatch

    /// Starts `launch.count` workers and waits until each is ready.
    ///
    /// - Throws: `EngineWorkerError` naming the executable when a worker cannot be started or
    ///   dies before it is ready.
    public init(launch: Launch, engine: EspeakEngine, logger: Logger) async throws {
        // A worker that dies leaves a broken pipe; writing to it must fail, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        self.launch = launch
        self.engine = engine
        self.logger = logger
        stallWatch = StallWatch(limit: launch.stallLimit)
        guard FileManager.default.isExecutableFile(atPath: launch.executable) else {
            throw EngineWorkerError.unavailable("\(launch.executable) is not an executable")
        }
        for _ in 0..<launch.count {
            let worker = try await spawn(backoff: RestartBackoff())
            release(worker)
        }
    }

    /// Validates and compiles `utterance` with the daemon's engine: the workers are sent the
    /// compiled input, never the utterance.
    public func prepare(_ utterance: Utterance) throws(SpeechInputError) -> PreparedUtterance {
        try engine.prepare(utterance)
    }

    /// Renders `prepared` (which `prepare(_:)` or the pool's engine made) on an idle worker, or
    /// on the first to become idle; fails the stream with `ForeignPreparationError` for an
    /// utterance another kind of renderer prepared.
    public func render(
        _ prepared: PreparedUtterance, chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        .starting {
            // A private announcement's text is never logged, not even when its worker dies.
            let text = prepared.isPrivate ? "(private)" : prepared.utterance.text
            return render(try prepared.input(as: EspeakInput.self), text: text, chunking)
        }
    }

    /// Prepares and renders `utterance`, for a caller that renders it once, at once; a bad input
    /// fails the stream before any worker sees it.
    public func render(
        _ utterance: Utterance, chunking: RenderChunking = .streaming
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        .starting { render(try prepare(utterance), chunking: chunking) }
    }

    private func render(
        _ input: EspeakInput, text: String, _ chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        let work = WorkerJob(input, chunking: chunking)
        if let error = state.withLock({ $0.crashedInputs[work.input.hashValue] }) {
            logger.warning(
                "refused a text that crashed an engine worker before",
                metadata: ["engine.error": "\(error)", "engine.text": "\(Self.excerpt(text))"])
            return .failing(error)
        }
        let (job, stream) = RenderJob.stream(text: text, work: work, maxSamplesAhead: launch.maxSamplesAhead)
        dispatch(job)
        return stream
    }

    /// Gives `job` to an idle worker now, with no task in between, or else to the next worker that
    /// becomes idle (`release`). A worker that died between being handed out and taking the job is
    /// skipped: the job waits for the next one (the replacement, if no other is free). A job still
    /// waiting when the pool stops fails.
    private func dispatch(_ job: RenderJob) {
        enum Next {
            case worker(EngineWorker)
            case waiting
            case stopped
        }
        while true {
            let next = state.withLock { state -> Next in
                if state.stopped { return .stopped }
                if let worker = state.idle.popLast() { return .worker(worker) }
                state.waiting.append(job)
                return .waiting
            }
            switch next {
            case .waiting:
                return
            case .stopped:
                job.finish(throwing: Self.stoppedError)
                return
            case .worker(let worker):
                if worker.start(job) {
                    watchForStalls()
                    return
                }
            }
        }
    }

    public func voices() async throws -> [VoiceInfo] {
        try await engine.voices()
    }

    /// Running, configured and restarted workers, and why workers cannot be started now.
    public var status: Status {
        let (status, template, startFailure) = state.withLock {
            (
                // A dead worker is not running, even while its exit is still being asked of a
                // template that does not answer.
                Status(
                    running: $0.workers.values.count { !$0.isDead }, configured: launch.count,
                    restarts: $0.restarts, sandbox: $0.sandbox),
                $0.readyTemplate, $0.startFailure
            )
        }
        var reported = status
        if let since = template?.unansweredSince, ContinuousClock.now - since >= launch.templateLimit {
            let seconds = Double((ContinuousClock.now - since).components.seconds)
            reported.problem =
                "the worker template has not answered for \(Int(seconds)) s (stopped or hung); "
                + "no engine worker can be started until it does or it is replaced"
        } else if status.running < status.configured, let startFailure {
            reported.problem = "engine workers cannot be started: \(startFailure)"
        }
        return reported
    }

    /// The process ids of the running workers (for tests and diagnostics).
    public var workerPIDs: [Int32] {
        state.withLock { $0.workers.values.map(\.pid) }
    }

    /// The process id of the worker template, once it has started (for tests and diagnostics).
    public var templatePID: Int32? {
        get async {
            guard let task = state.withLock({ $0.template }) else { return nil }
            return try? await task.value.pid
        }
    }

    /// Stops every worker and their template; renders still running, and renders waiting for
    /// a worker, fail.
    public func shutdown() {
        let (workers, waiting, template) = state.withLock { state in
            state.stopped = true
            state.idle.removeAll()
            defer { state.waiting.removeAll() }
            return (Array(state.workers.values), state.waiting, state.template)
        }
        for job in waiting { job.finish(throwing: Self.stoppedError) }
        for worker in workers { worker.stop() }
        if let template {
            Task { try? await template.value.stop() }
        }
    }

    // MARK: Workers

    /// The running template, started (or started again, when the last one ended) on demand;
    /// callers that come while it starts wait for the same one.
    ///
    /// - Throws: `EngineWorkerError.unavailable` when the template cannot be started, or ended at
    ///   once; the caller's backoff decides when to try again.
    private func currentTemplate() async throws -> WorkerTemplate {
        // A template that had ended, or stopped answering, is replaced once here; one that ends
        // as soon as it started is the caller's failure, not a reason to start processes in a loop.
        for _ in 0..<2 {
            let task = state.withLock { state -> Task<WorkerTemplate, any Error> in
                if let task = state.template { return task }
                let task = Task { try await self.startTemplate() }
                state.template = task
                return task
            }
            let template: WorkerTemplate
            do {
                template = try await task.value
            } catch {
                state.withLock { if $0.template == task { $0.template = nil } }
                throw error
            }
            if let since = template.unansweredSince, ContinuousClock.now - since > launch.templateRestartLimit {
                logger.error(
                    "the engine worker template stopped answering; starting a new one",
                    metadata: [
                        "engine.template.pid": "\(template.pid)",
                        "engine.template.silent": "\(ContinuousClock.now - since)",
                    ])
                template.killProcess()
            } else if template.isRunning {
                state.withLock { if $0.template == task { $0.readyTemplate = template } }
                return template
            }
            state.withLock {
                if $0.template == task {
                    $0.template = nil
                    $0.readyTemplate = nil
                }
            }
        }
        throw EngineWorkerError.unavailable("the worker template ended as soon as it started")
    }

    private func startTemplate() async throws -> WorkerTemplate {
        let template: WorkerTemplate
        do {
            // The daemon's engine built the data directory (with the voice variants): the
            // template and its workers only read it, so they need no write access anywhere.
            // The default voice, as the daemon compiles it, is loaded by the template: the
            // workers it forks share its dictionary instead of each loading its own.
            let voice = (try? engine.espeakInput(for: Utterance("a")))?.voice
            template = try WorkerTemplate(
                executable: launch.executable,
                arguments: ["--data", engine.dataPath] + (voice.map { ["--voice", $0] } ?? []) + launch.arguments,
                logger: logger)
        } catch {
            throw EngineWorkerError.unavailable("\(launch.executable): \(error)")
        }
        let rate: Int
        let sandbox: String
        do {
            (rate, sandbox) = try await template.ready(limit: launch.templateStartLimit)
        } catch {
            template.killProcess()
            throw error
        }
        if rate != engine.format.sampleRate {
            template.stop()
            throw EngineWorkerError.unavailable(
                "a worker renders at \(rate) Hz, the daemon expects \(format.sampleRate)")
        }
        let first = state.withLock { state in
            defer { state.sandbox = sandbox }
            return state.sandbox == nil
        }
        if first { logger.info("engine workers are sandboxed", metadata: ["engine.sandbox": "\(sandbox)"]) }
        logger.debug("engine worker template ready", metadata: ["engine.template.pid": "\(template.pid)"])
        return template
    }

    /// Forks a worker for a slot with `backoff` from the template and waits until it is ready.
    private func spawn(backoff: RestartBackoff) async throws -> EngineWorker {
        let template = try await currentTemplate()
        let pipes: StandardStreams
        do {
            pipes = try StandardStreams()
        } catch {
            throw EngineWorkerError.unavailable("\(error)")
        }
        // Room for a whole chunk (a second of audio is 44 kB; `.whole` chunks up to ten seconds),
        // so the worker writes it without waiting for the daemon to read. Best effort: the
        // default 64 kB works, only with more wake-ups.
        _ = fcntl(pipes.output, Self.setPipeSize, Int32(WorkerFrame.maximumPayload))
        let pid: Int32
        do {
            pid = try await template.fork(pipes, limit: launch.templateLimit)
        } catch {
            pipes.closeTheirs()
            pipes.closeOurs()
            throw error
        }
        pipes.closeTheirs()
        let callbacks = EngineWorker.Callbacks(
            // How the worker is confined is what its template reported.
            ready: { [weak self] worker, rate, _ in self?.ready(worker, sampleRate: rate) },
            idle: { [weak self] worker in self?.finishedJob(worker) },
            died: { [weak self] worker, error, job in self?.died(worker, error: error, job: job) },
            requeue: { [weak self] job in self?.dispatch(job) })
        let worker = EngineWorker(
            process: WorkerProcess(
                pid: pid, input: pipes.input, output: pipes.output, errors: pipes.errors,
                waitForExit: { [limit = launch.templateLimit] in template.waitForExit(pid, limit: limit) }),
            callbacks: callbacks, diagnostics: .engineWorker(logger: logger))
        let id = ObjectIdentifier(worker)
        let rate = try await withCheckedThrowingContinuation { continuation in
            let early = state.withLock { state -> Result<Int, EngineWorkerError>? in
                if let error = state.diedEarly.removeValue(forKey: id) {
                    state.readyEarly[id] = nil
                    return .failure(.unavailable("\(error) before it was ready"))
                }
                state.workers[id] = worker
                state.backoff[id] = backoff
                if let rate = state.readyEarly.removeValue(forKey: id) { return .success(rate) }
                state.starting[id] = continuation
                return nil
            }
            if let early { continuation.resume(with: early.mapError { $0 }) }
        }
        if rate != engine.format.sampleRate {
            worker.stop()
            throw EngineWorkerError.unavailable(
                "a worker renders at \(rate) Hz, the daemon expects \(format.sampleRate)")
        }
        logger.debug("engine worker ready", metadata: ["engine.worker.pid": "\(worker.pid)"])
        return worker
    }

    /// How many inputs that crashed a worker are remembered and refused at once.
    static let crashMemory = 64

    /// Remembers that `work`'s input crashed a worker with `error` (whatever its chunking),
    /// forgetting the oldest beyond `crashMemory`.
    private func rememberCrash(_ work: WorkerJob, _ error: EngineWorkerError) {
        let key = work.input.hashValue
        state.withLock { state in
            if state.crashedInputs.updateValue(error, forKey: key) == nil { state.crashedOrder.append(key) }
            if state.crashedOrder.count > Self.crashMemory {
                state.crashedInputs[state.crashedOrder.removeFirst()] = nil
            }
        }
    }

    /// What a render still waiting for a worker fails with when the pool stops.
    private static let stoppedError = EngineWorkerError.unavailable("the engine workers stopped")

    /// `F_SETPIPE_SZ` from linux/fcntl.h, which glibc declares only under `_GNU_SOURCE`.
    private static let setPipeSize: Int32 = 1031

    private func ready(_ worker: EngineWorker, sampleRate: Int) {
        let continuation = state.withLock { state in
            let id = ObjectIdentifier(worker)
            guard let continuation = state.starting.removeValue(forKey: id) else {
                state.readyEarly[id] = sampleRate
                return nil as CheckedContinuation<Int, any Error>?
            }
            return continuation
        }
        continuation?.resume(returning: sampleRate)
    }

    private func finishedJob(_ worker: EngineWorker) {
        release(worker)
    }

    private func died(_ worker: EngineWorker, error: EngineWorkerError, job: RenderJob?) {
        let (known, starting, stopped, slot) = state.withLock { state in
            let id = ObjectIdentifier(worker)
            let known = state.workers.removeValue(forKey: id) != nil
            if !known { state.diedEarly[id] = error }
            state.idle.removeAll { $0 === worker }
            var slot = state.backoff.removeValue(forKey: id) ?? RestartBackoff()
            slot.workerDied(afterTakingAJob: worker.tookJob)
            return (known, state.starting.removeValue(forKey: id), state.stopped, slot)
        }
        if let starting {
            starting.resume(throwing: EngineWorkerError.unavailable("\(error) before it was ready"))
            return
        }
        // Died before `spawn` was waiting for it: `spawn` finds `diedEarly` and fails.
        if !known { return }
        if stopped { return }
        if let job {
            if error.isCrashByInput { rememberCrash(job.work, error) }
            var metadata: Logger.Metadata = [
                "engine.worker.pid": "\(worker.pid)", "engine.error": "\(error)",
                "engine.text": "\(Self.excerpt(job.text))",
            ]
            // What the worker printed last, when it has reached the daemon by now (glibc's
            // "*** stack smashing detected ***", say).
            if let line = worker.lastDiagnostic { metadata["engine.stderr"] = "\(line)" }
            logger.error("engine worker died while rendering; its announcement failed", metadata: metadata)
        } else {
            logger.error(
                "engine worker died while idle",
                metadata: ["engine.worker.pid": "\(worker.pid)", "engine.error": "\(error)"])
        }
        Task { await replace(slot) }
    }

    /// Starts a replacement in a slot, after the slot's backoff: at once unless its workers keep
    /// failing to start, so a worker that cannot start does not spin.
    private func replace(_ slot: RestartBackoff) async {
        var slot = slot
        while !state.withLock({ $0.stopped }) {
            if slot.delay > .zero { try? await Task.sleep(for: slot.delay) }
            do {
                let worker = try await spawn(backoff: slot)
                state.withLock {
                    $0.restarts += 1
                    $0.startFailure = nil
                }
                release(worker)
                return
            } catch {
                let stopped = state.withLock { state in
                    if !state.stopped { state.startFailure = "\(error)" }
                    return state.stopped
                }
                if stopped { return }
                logger.error("engine worker did not start", metadata: ["engine.error": "\(error)"])
                slot.startFailed()
            }
        }
    }

    /// Gives `worker` the oldest waiting job, or puts it with the idle ones. A job it could not
    /// take (it died meanwhile) goes back to `dispatch`.
    private func release(_ worker: EngineWorker) {
        let job = state.withLock { state -> RenderJob? in
            guard !state.stopped, state.workers[ObjectIdentifier(worker)] != nil else { return nil }
            guard !state.waiting.isEmpty else {
                state.idle.append(worker)
                return nil
            }
            return state.waiting.removeFirst()
        }
        guard let job else { return }
        if worker.start(job) {
            watchForStalls()
        } else {
            dispatch(job)
        }
    }

    /// Starts the stall watch unless it runs (see `StallWatch`).
    private func watchForStalls() {
        stallWatch.start { [weak self] in
            self?.state.withLock { state in state.stopped ? nil : state.workers.values.filter(\.isRendering) }
        }
    }

    /// The first 200 characters, escaped, for a log line an operator can report.
    static func excerpt(_ text: String) -> String {
        let head = String(text.prefix(200))
        let escaped = head.unicodeScalars.map { scalar -> String in
            scalar.properties.generalCategory == .control || scalar == "\\"
                ? scalar.escaped(asASCII: true) : String(scalar)
        }.joined()
        return text.count > 200 ? escaped + "… (\(text.count) characters)" : escaped
    }
}
