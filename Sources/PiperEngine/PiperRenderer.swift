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

/// What a Piper worker is sent: the segments of one utterance, each with its own rate, volume
/// and pause, their text in order. Positions count Unicode scalars of the utterance's text from 1.
public struct PiperInput: Sendable, Hashable, Encodable {
    public struct Segment: Sendable, Hashable, Encodable {
        public var text: String
        public var position: Int
        public var lengthScale: Double
        public var volume: Double
        public var pauseAfter: Double
    }
    public var voice: String
    public var segments: [Segment]

    private enum CodingKeys: String, CodingKey { case segments }
}

/// Renders utterances with Piper voices, each in a worker process of its own
/// (`speakd-piper-worker.py` in the venv `scripts/install-deps` makes), started on its first
/// request and started again after it dies. A voice's worker renders one job at a time.
///
/// Piper honours `rate` (as its length scale), `volume`, `pauseAfter`, sentences and paragraphs;
/// `pitch`, `ipa`, `spellOut`, `punctuation` and `mark` are refused by name, never ignored.
public final class PiperRenderer: SpeechRenderer {
    public static let engine = "piper"

    /// How the workers are started.
    public struct Launch: Sendable, Hashable {
        /// The venv's Python.
        public var python: String
        /// `speakd-piper-worker.py`, with `piper_sandbox.py` beside it.
        public var script: String
        /// The worker's address-space limit.
        public var memoryLimitMiB: Int
        /// The user a worker started as root becomes once its voice is loaded.
        public var user: String
        /// A worker that sends nothing for this long while rendering is killed, failing its job.
        public var stallLimit: Duration
        /// A worker that has not said it is ready after this long is killed, failing the job
        /// that started it.
        public var startLimit: Duration
        /// Piper's noise scales at 0, so the same text always gives the same samples (for tests
        /// that compare with `piper-tts`'s own output).
        public var deterministic = false
        /// The threads each worker's onnxruntime session computes one run with (its intra-op
        /// threads); 0 leaves onnxruntime's default, one per core.
        public var threads = 0
        /// How far ahead of its listener a job renders, in samples, before its worker is held
        /// back (as espeak-ng's workers are): a long text costs the audio of a few seconds ahead,
        /// not that of the whole text.
        public var maxSamplesAhead = 1 << 18

        public init(
            python: String, script: String, memoryLimitMiB: Int = 2048, user: String = "nobody",
            stallLimit: Duration = .seconds(10), startLimit: Duration = .seconds(30), threads: Int = 0
        ) {
            self.python = python
            self.script = script
            self.memoryLimitMiB = memoryLimitMiB
            self.user = user
            self.stallLimit = stallLimit
            self.startLimit = startLimit
            self.threads = threads
        }

        /// The threads per worker that keep `workers` workers of a voice from competing for
        /// `cores` cores: each run on its own share, so two jobs render side by side rather than
        /// taking turns at every operator. One worker (or none started yet) gets every core.
        public static func threads(workers: Int, cores: Int) -> Int {
            max(1, cores / max(1, workers))
        }

        /// The worker script in the source tree this build was made from: the Python package
        /// `workers/piper` at the top of the tree.
        public static var sourceTreeScript: String {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("workers/piper/speakd-piper-worker.py").path
        }
    }

    public let format: AudioFormat
    public var engineName: String { Self.engine }
    /// Piper, the version of the `piper-tts` package in its venv, its voices by name, and what it
    /// renders with: the worker and its sandbox (not their directory: Python may write its byte
    /// code there), each voice's model and configuration, and the venv's packages with their
    /// versions. It reads the venv's package list each time it is asked (at the start).
    public var engineIdentities: [EngineIdentity] {
        let packages = Self.installedPackages(python: launch.python)
        let prefix = "piper_tts-"
        let version = packages.first { $0.hasPrefix(prefix) }.map {
            String($0.dropFirst(prefix.count).dropLast(".dist-info".count))
        }
        var files = [launch.script, PathText.join(PathText.directory(of: launch.script), "piper_sandbox.py")]
        for voice in voicesByName.values.sorted(by: { $0.name < $1.name }) {
            files += [voice.model, voice.configuration]
        }
        return [
            EngineIdentity(
                name: engineName, version: version, details: voicesByName.keys.sorted(), files: files, names: packages)
        ]
    }

    /// The packages installed in the venv of `python` (its `bin/python3`), with their versions:
    /// the names of `lib/pythonX.Y/site-packages/NAME-VERSION.dist-info`, sorted.
    static func installedPackages(python: String) -> [String] {
        let files = FileManager.default
        let library = PathText.join(PathText.directory(of: PathText.directory(of: python)), "lib")
        var packages: [String] = []
        for version in (try? files.contentsOfDirectory(atPath: library))?.sorted() ?? [] {
            let site = PathText.join(PathText.join(library, version), "site-packages")
            packages += ((try? files.contentsOfDirectory(atPath: site)) ?? []).filter { $0.hasSuffix(".dist-info") }
                .sorted()
        }
        return packages
    }
    public let voicesByName: [String: PiperVoice]
    /// How its workers are started.
    public let launch: Launch
    private let workers: [String: [PiperWorkerSlot]]

    /// - Parameters:
    ///   - voices: the voices it speaks (`PiperVoice.load`).
    ///   - format: the format it renders in (the default engine's, so the two can be mixed);
    ///     a voice of another rate is resampled in its worker.
    ///   - warmWorkers: 0 for one worker per voice, started by the voice's first request; N for N
    ///     workers per voice, started now (in the background) and kept running.
    public init(voices: [PiperVoice], launch: Launch, format: AudioFormat, warmWorkers: Int = 0, logger: Logger) {
        self.format = format
        self.launch = launch
        voicesByName = Dictionary(voices.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        workers = voicesByName.mapValues { voice in
            (0..<max(1, warmWorkers)).map { _ in
                PiperWorkerSlot(voice: voice, launch: launch, rate: format.sampleRate, logger: logger)
            }
        }
        if warmWorkers > 0 {
            for slot in workers.values.joined() { Task { await slot.warm() } }
        }
    }

    public func voices() async throws -> [VoiceInfo] {
        voicesByName.values.sorted { $0.name < $1.name }.map(\.info)
    }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        try utterance.validate()
        try utterance.checkHasNoClips()
        var segments: [PiperInput.Segment] = []
        var voiceName: String?
        var position = 1
        var characters = 0
        let starts = Set(utterance.boundaries.keys)
        for (index, (span, resolved)) in zip(utterance.spans, utterance.resolvedSpans).enumerated() {
            func field(_ name: String, setHere: Bool) -> String { setHere ? "spans[\(index)].\(name)" : name }
            let own = span.attributes
            let refused: [(String, Bool, Bool)] = [
                ("pitch", own.pitch != nil, resolved.attributes.pitch.map { $0 != 1 } ?? false),
                ("ipa", own.ipa != nil, resolved.attributes.ipa != nil),
                ("spellOut", own.spellOut != nil, resolved.attributes.spellOut == true),
                ("punctuation", own.punctuation != nil, resolved.attributes.punctuation != nil),
            ]
            for (name, setHere, set) in refused where set || setHere {
                throw .unsupported(field: field(name, setHere: setHere), "Piper voices cannot honour '\(name)'")
            }
            if span.mark != nil {
                throw .unsupported(field: "spans[\(index)].mark", "marks are not reported by Piper voices yet")
            }
            let voiceField = field("voice", setHere: own.voice != nil)
            guard let name = resolved.attributes.voice, let voice = voicesByName[name] else {
                throw .notFound(
                    field: "spans[\(index)].voice",
                    "every span given to a Piper voice needs one")
            }
            if let voiceName, voiceName != name {
                throw .unsupported(field: voiceField, "one utterance is spoken by one Piper voice")
            }
            voiceName = name
            if let language = resolved.attributes.language, !voice.speaks(language) {
                throw .unsupported(
                    field: voiceField,
                    "voice '\(name)' speaks \(voice.languages.joined(separator: ", ")), not \(language.canonical)")
            }
            if let (range, script) = voice.unspeakable(span.text) {
                let run = span.text.dropFirst(range.lowerBound).prefix(min(range.count, 24))
                throw .unsupported(
                    field: utterance.spans.count == 1 ? "text" : "spans[\(index)].text",
                    "characters \(characters + range.lowerBound + 1)–\(characters + range.upperBound) of the text "
                        + "('\(run)\(range.count > 24 ? "…" : "")') are \(script.rawValue), which voice '\(name)' "
                        + "cannot speak: give them a span with their language, for espeak-ng")
            }
            // A sentence or paragraph start inside the span cuts it: each segment is rendered apart.
            var pieces: [String] = []
            var current = ""
            for character in span.text {
                if starts.contains(characters), !current.isEmpty {
                    pieces.append(current)
                    current = ""
                }
                current.append(character)
                characters += 1
            }
            pieces.append(current)
            for (pieceIndex, piece) in pieces.enumerated() {
                segments.append(
                    PiperInput.Segment(
                        text: piece, position: position, lengthScale: 1 / (resolved.attributes.rate ?? 1),
                        volume: min(1, resolved.attributes.volume ?? 1),
                        pauseAfter: pieceIndex == pieces.count - 1 ? span.pauseAfter ?? 0 : 0))
                position += piece.unicodeScalars.count
            }
        }
        guard let voiceName, let voice = voicesByName[voiceName] else {
            throw .notFound(field: "voice", "no Piper voice was named")
        }
        var map = TextOffsetMap(textLength: utterance.text.utf16.count)
        var offset = 0
        for scalar in utterance.text.unicodeScalars {
            let width = scalar.utf16.count
            map.append(scalars: 1, from: offset..<(offset + width))
            offset += width
        }
        return PreparedUtterance(
            utterance: utterance, voices: Array(repeating: voice.info, count: utterance.spans.count),
            engineInput: PiperInput(voice: voiceName, segments: segments), textMap: map)
    }

    public func render(
        _ prepared: PreparedUtterance, chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        let input: PiperInput
        do {
            input = try prepared.input(as: PiperInput.self)
        } catch {
            return .failing(error)
        }
        // The worker with the fewest jobs queued or rendering.
        guard let worker = workers[input.voice]?.min(by: { $0.load < $1.load }) else {
            return AsyncThrowingStream {
                $0.finish(throwing: PiperWorkerError(message: "no worker for voice '\(input.voice)'"))
            }
        }
        // A private announcement's text is never logged, not even when its worker dies.
        let (job, stream) = RenderJob.stream(
            text: prepared.isPrivate ? "(private)" : prepared.utterance.text,
            work: input.workerJob(chunking: chunking), maxSamplesAhead: launch.maxSamplesAhead)
        worker.submitted()
        Task { await worker.run(job) }
        return stream
    }

    /// Ends every worker (once nothing renders any more: a job in flight fails).
    public func shutdown() async {
        for slot in workers.values.joined() { await slot.stop() }
    }

    /// The pids of the voice's running workers (for tests and diagnostics).
    public func workerPIDs(voice: String) -> [Int32] {
        workers[voice]?.compactMap(\.pid) ?? []
    }
}

extension PiperRenderer: NamedVoiceRenderer {
    public func hasVoice(named name: String) -> Bool {
        voicesByName[name] != nil
    }

    public func voice(named name: String, speaks language: LanguageTag) -> Bool {
        voicesByName[name]?.speaks(language) ?? false
    }

    public func preparedItself(_ prepared: PreparedUtterance) -> Bool {
        prepared.engineInput is PiperInput
    }
}

/// A Piper worker that failed a job: it could not start, or died while rendering.
public struct PiperWorkerError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { "Piper worker: \(message)" }
}

/// The workers of one voice, each in a slot: started when a job needs it (or at start-up, warm),
/// one job at a time, on the runtime every engine's workers share (`EngineWorker`, `RenderJob`,
/// `StallWatch`), started again by the next job after it dies.
actor PiperWorkerSlot {
    private let voice: PiperVoice
    private let launch: PiperRenderer.Launch
    private let rate: Int
    private let logger: Logger
    private var worker: EngineWorker?
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let queued = Atomic<Int>(0)
    private let stallWatch: StallWatch
    /// Failed starts in a row, as an espeak-ng worker slot counts them: a worker that cannot
    /// start is tried again after 0.1 s doubling to 5 s, not at once by every job.
    private var backoff = RestartBackoff()
    /// The worker that ran last, while its death is not yet counted in `backoff`.
    private var lastWorker: EngineWorker?
    /// What the worker's reader thread reaches.
    private let shared = Shared()

    private final class Shared: Sendable {
        /// The running worker's pid, 0 for none.
        let runningPID = Atomic<Int32>(0)
        /// Resumed (true) when the job the worker renders now ends: with its `done` or
        /// `failure`, or with the worker's death while it had the job.
        let jobEnded = Mutex<CheckedContinuation<Bool, Never>?>(nil)
    }

    init(voice: PiperVoice, launch: PiperRenderer.Launch, rate: Int, logger: Logger) {
        self.voice = voice
        self.launch = launch
        self.rate = rate
        self.logger = logger
        stallWatch = StallWatch(limit: launch.stallLimit)
    }

    nonisolated var pid: Int32? {
        let pid = shared.runningPID.load(ordering: .relaxed)
        return pid == 0 ? nil : pid
    }

    /// Jobs given to this worker that have not ended.
    nonisolated var load: Int { queued.load(ordering: .relaxed) }

    /// Counts a job that `run` will be given.
    nonisolated func submitted() {
        queued.add(1, ordering: .relaxed)
    }

    /// Waits for the worker to be free, and takes it.
    private func acquire() async {
        while busy { await withCheckedContinuation { waiting.append($0) } }
        busy = true
    }

    private func release() {
        busy = false
        if !waiting.isEmpty { waiting.removeFirst().resume() }
    }

    /// Ends the worker, if it runs (a job in flight fails); a later job starts another.
    func stop() {
        guard let worker else { return }
        self.worker = nil
        lastWorker = nil
        shared.runningPID.store(0, ordering: .relaxed)
        // Its reader reaps it.
        if !worker.isDead { kill(worker.pid, SIGKILL) }
        worker.stop()
    }

    /// Starts the worker now, if it is not running, so no request waits for it.
    func warm() async {
        await acquire()
        defer { release() }
        do {
            _ = try await running()
        } catch {
            logger.warning("Piper worker for \(voice.name) did not start: \(error)")
        }
    }

    /// Renders `job` on this slot's worker once it is free, starting the worker when none runs;
    /// returns when the job ended.
    func run(_ job: RenderJob) async {
        await acquire()
        defer {
            release()
            queued.subtract(1, ordering: .relaxed)
        }
        // A worker that died between its `ready` and this job is started again, once.
        for attempt in 0..<2 {
            if job.isCancelled {
                job.finish()
                return
            }
            let worker: EngineWorker
            do {
                worker = try await running()
            } catch {
                job.finish(throwing: error)
                return
            }
            let taken = await withCheckedContinuation { (ended: CheckedContinuation<Bool, Never>) in
                shared.jobEnded.withLock { $0 = ended }
                guard worker.start(job) else {
                    // Dead already: its death, reported with no job, left this wait to be ended here.
                    shared.jobEnded.withLock { $0.take() }?.resume(returning: false)
                    return
                }
                stallWatch.start { [weak worker] in
                    guard let worker, !worker.isDead else { return nil }
                    return worker.isRendering ? [worker] : []
                }
            }
            if taken { return }
            self.worker = nil
            if attempt == 1 {
                job.finish(
                    throwing: PiperWorkerError(message: "the worker for \(voice.name) ended before it took the job"))
            }
        }
    }

    /// The running worker, started if there is none (or it died), after the slot's backoff.
    private func running() async throws -> EngineWorker {
        if let worker, !worker.isDead { return worker }
        worker = nil
        if let lastWorker {
            backoff.workerDied(afterTakingAJob: lastWorker.tookJob)
            self.lastWorker = nil
        }
        if backoff.delay > .zero { try? await Task.sleep(for: backoff.delay) }
        do {
            let started = try await start()
            worker = started
            lastWorker = started
            return started
        } catch {
            backoff.startFailed()
            throw error
        }
    }

    /// Starts a worker and waits for its `ready`.
    private func start() async throws -> EngineWorker {
        let environment = [
            "ORT_DISABLE_TELEMETRY=1", "HOME=/nonexistent", "XDG_CACHE_HOME=/nonexistent",
            "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "OMP_NUM_THREADS=1",
            "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
        ]
        let spawned = try SpawnedProcess(
            executable: launch.python,
            arguments: [
                "-I", launch.script, "--model", voice.model, "--config", voice.configuration, "--rate", "\(rate)",
                "--memory-limit-mib", "\(launch.memoryLimitMiB)", "--user", launch.user,
                "--threads", "\(launch.threads)",
            ] + (launch.deterministic ? ["--deterministic"] : []), environment: environment)
        let startup = Startup()
        let (logger, name, shared) = (logger, voice.name, shared)
        let callbacks = EngineWorker.Callbacks(
            ready: { _, sampleRate, sandbox in startup.resolve(.success((sampleRate, sandbox))) },
            idle: { _ in shared.jobEnded.withLock { $0.take() }?.resume(returning: true) },
            died: { worker, error, job in
                _ = shared.runningPID.compareExchange(expected: worker.pid, desired: 0, ordering: .relaxed)
                startup.resolve(.failure(error))
                // Its job, if it had one, was failed by its reader.
                guard job != nil else { return }
                logger.warning(
                    "Piper worker ended while rendering; its announcement failed",
                    metadata: ["voice": "\(name)", "pid": "\(worker.pid)", "error": "\(error)"])
                shared.jobEnded.withLock { $0.take() }?.resume(returning: true)
            },
            // Only a forked worker dies with a template; a Piper worker has none.
            requeue: { job in job.finish(throwing: EngineWorkerError.unavailable("the Piper worker ended")) })
        let worker = EngineWorker(
            process: WorkerProcess(spawned: spawned), callbacks: callbacks,
            diagnostics: WorkerDiagnostics(logger: logger, label: "Piper worker") { _ in true })
        let watchdog = Watchdog(limit: launch.startLimit) { kill(spawned.pid, SIGKILL) }
        let ready = await startup.wait()
        let late = watchdog.stop()
        guard case .success(let (sampleRate, sandbox)) = ready, sampleRate == rate else {
            if !worker.isDead { kill(worker.pid, SIGKILL) }
            worker.stop()
            throw PiperWorkerError(
                message: late
                    ? "the worker for \(voice.name) was not ready within \(launch.startLimit)"
                    : "the worker for \(voice.name) did not start")
        }
        logger.info(
            "Piper worker started",
            metadata: ["voice": "\(voice.name)", "pid": "\(spawned.pid)", "sandbox": "\(sandbox)"])
        shared.runningPID.store(spawned.pid, ordering: .relaxed)
        return worker
    }
}

/// A worker's `ready`, or its death before it: resolved once, by its reader thread, and waited
/// for by the slot that started it.
private final class Startup: Sendable {
    private struct State {
        var result: Result<(Int, String), EngineWorkerError>?
        var waiter: CheckedContinuation<Result<(Int, String), EngineWorkerError>, Never>?
    }
    private let state = Mutex(State())

    func resolve(_ result: Result<(Int, String), EngineWorkerError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<(Int, String), EngineWorkerError>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    func wait() async -> Result<(Int, String), EngineWorkerError> {
        await withCheckedContinuation { continuation in
            let result = state.withLock { state in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let result { continuation.resume(returning: result) }
        }
    }
}

extension PiperRenderer {
    /// The `J` frame that hands the worker a job, with the input as JSON with sorted keys.
    /// `workers/piper/tests` reads the frame this writes.
    package static func jobFrame(_ input: PiperInput, chunking: RenderChunking) -> [UInt8] {
        WorkerFrame.job(input.workerJob(chunking: chunking)).encoded()
    }
}

extension PiperInput {
    /// The input as the Piper worker reads it from a job frame (`WorkerJob.input`): JSON with
    /// sorted keys.
    public var workerInput: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { Array($0) } ?? []
    }

    /// The job a Piper worker is sent for this input: what `render` hands its worker.
    func workerJob(chunking: RenderChunking) -> WorkerJob {
        WorkerJob(chunking: chunking, input: workerInput)
    }
}
