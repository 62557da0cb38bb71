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

        package init(text: String, position: Int, lengthScale: Double, volume: Double, pauseAfter: Double) {
            self.text = text
            self.position = position
            self.lengthScale = lengthScale
            self.volume = volume
            self.pauseAfter = pauseAfter
        }
    }
    public var voice: String
    public var segments: [Segment]

    package init(voice: String, segments: [Segment]) {
        self.voice = voice
        self.segments = segments
    }

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
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: PCMChunk.self, throwing: (any Error).self)
        let input: PiperInput
        do {
            input = try prepared.input(as: PiperInput.self)
        } catch {
            continuation.finish(throwing: error)
            return stream
        }
        // The worker with the fewest jobs queued or rendering.
        guard let worker = workers[input.voice]?.min(by: { $0.load < $1.load }) else {
            continuation.finish(throwing: PiperWorkerError(message: "no worker for voice '\(input.voice)'"))
            return stream
        }
        let job = PiperJob(input: input, chunking: chunking, continuation: continuation)
        continuation.onTermination = { _ in job.cancel() }
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

/// One render on its way through a worker.
final class PiperJob: Sendable {
    let input: PiperInput
    let chunking: RenderChunking
    private let continuation: AsyncThrowingStream<PCMChunk, any Error>.Continuation
    private struct State {
        var cancelled = false
        var ended = false
        var process: PiperProcess?
    }
    private let state = Mutex(State())

    init(
        input: PiperInput, chunking: RenderChunking, continuation: AsyncThrowingStream<PCMChunk, any Error>.Continuation
    ) {
        self.input = input
        self.chunking = chunking
        self.continuation = continuation
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    func attach(_ process: PiperProcess) -> Bool {
        state.withLock {
            $0.process = process
            return !$0.cancelled
        }
    }

    /// Aborts the render if its worker still has it. The cancel is written under the lock that
    /// `finish` takes before the worker is free for another job, so it can never abort the next one.
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            if !state.ended { state.process?.send(WorkerFrame.cancel.encoded()) }
        }
    }

    func yield(_ chunk: PCMChunk) {
        continuation.yield(chunk)
    }

    /// Ends the stream (with `error`, when given).
    func finish(throwing error: (any Error)? = nil) {
        state.withLock { $0.ended = true }
        // Outside the lock: finishing runs `onTermination`, which calls `cancel`.
        if let error { continuation.finish(throwing: error) } else { continuation.finish() }
    }
}

/// A running worker process.
final class PiperProcess: Sendable {
    let process: SpawnedProcess
    private let input: Mutex<Int32>

    init(process: SpawnedProcess) {
        self.process = process
        input = Mutex(process.input)
    }

    func send(_ bytes: [UInt8]) {
        input.withLock { descriptor in
            guard descriptor >= 0 else { return }
            _ = bytes.withUnsafeBytes { raw in
                var written = 0
                while written < raw.count {
                    let result = Glibc.write(descriptor, raw.baseAddress! + written, raw.count - written)
                    if result < 0 {
                        if errno == EINTR { continue }
                        return false
                    }
                    written += result
                }
                return true
            }
        }
    }

    private let ended = Atomic<Bool>(false)

    /// Kills it and reaps it; once (a later call does nothing, so its pid and descriptors,
    /// perhaps reused by then, are never touched again).
    func end() {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        kill(process.pid, SIGKILL)
        input.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
        _ = process.waitForExit()
        close(process.output)
    }
}

/// The worker of one voice: started when a job needs it, one job at a time.
actor PiperWorkerSlot {
    private let voice: PiperVoice
    private let launch: PiperRenderer.Launch
    private let rate: Int
    private let logger: Logger
    private var process: PiperProcess?
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let runningPID = Atomic<Int32>(0)
    private let queued = Atomic<Int>(0)

    init(voice: PiperVoice, launch: PiperRenderer.Launch, rate: Int, logger: Logger) {
        self.voice = voice
        self.launch = launch
        self.rate = rate
        self.logger = logger
    }

    nonisolated var pid: Int32? {
        let pid = runningPID.load(ordering: .relaxed)
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

    /// Ends the worker, if it runs; a later job starts another.
    func stop() {
        guard let process else { return }
        self.process = nil
        runningPID.store(0, ordering: .relaxed)
        process.end()
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

    func run(_ job: PiperJob) async {
        await acquire()
        defer {
            release()
            queued.subtract(1, ordering: .relaxed)
        }
        if job.isCancelled {
            job.finish()
            return
        }
        let worker: PiperProcess
        do {
            worker = try await running()
        } catch {
            job.finish(throwing: error)
            return
        }
        guard job.attach(worker) else {
            job.finish()
            return
        }
        let alive = await Self.render(job, on: worker, stallLimit: launch.stallLimit)
        if !alive {
            logger.warning("Piper worker \(worker.process.pid) for \(voice.name) ended while rendering")
            process = nil
            runningPID.store(0, ordering: .relaxed)
            DetachedThread.start(name: "speakd-piper-reap") { worker.end() }
        }
    }

    /// The running worker, started if there is none.
    private func running() async throws -> PiperProcess {
        if let process { return process }
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
        let started = PiperProcess(process: spawned)
        let logger = logger
        DetachedThread.start(name: "speakd-piper-stderr") {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = Glibc.read(spawned.errors, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                logger.warning("Piper worker: \(String(decoding: buffer[..<count], as: UTF8.self))")
            }
            close(spawned.errors)
        }
        let watchdog = Watchdog(limit: launch.startLimit) { kill(spawned.pid, SIGKILL) }
        let ready = await withCheckedContinuation { (continuation: CheckedContinuation<WorkerFrame?, Never>) in
            DetachedThread.start(name: "speakd-piper-start") {
                continuation.resume(returning: try? WorkerFrame.read(from: spawned.output))
            }
        }
        let late = watchdog.stop()
        guard case .ready(let sampleRate, let sandbox)? = ready, sampleRate == rate else {
            DetachedThread.start(name: "speakd-piper-reap") { started.end() }
            throw PiperWorkerError(
                message: late
                    ? "the worker for \(voice.name) was not ready within \(launch.startLimit)"
                    : "the worker for \(voice.name) did not start")
        }
        logger.info(
            "Piper worker started",
            metadata: ["voice": "\(voice.name)", "pid": "\(spawned.pid)", "sandbox": "\(sandbox)"])
        process = started
        runningPID.store(spawned.pid, ordering: .relaxed)
        return started
    }

    /// Sends the job and feeds its stream until the worker says it ended; false when the worker
    /// died (the job is failed with why).
    private static func render(_ job: PiperJob, on worker: PiperProcess, stallLimit: Duration) async -> Bool {
        worker.send(PiperRenderer.jobFrame(job.input, chunking: job.chunking))
        let pid = worker.process.pid
        let watchdog = Watchdog(limit: stallLimit) { kill(pid, SIGKILL) }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DetachedThread.start(name: "speakd-piper-\(worker.process.pid)") {
                var events: [EngineEvent] = []
                while true {
                    let frame = try? WorkerFrame.read(from: worker.process.output)
                    watchdog.touch()
                    if case .done? = frame { watchdog.stop() } else if case .failure? = frame { watchdog.stop() }
                    switch frame {
                    case .events(let reported)?:
                        events = reported
                    case .pcm(let samples)?:
                        job.yield(PCMChunk(samples: samples, events: events))
                        events = []
                    case .done?:
                        job.finish()
                        continuation.resume(returning: true)
                        return
                    case .failure(let message)?:
                        job.finish(throwing: PiperWorkerError(message: message))
                        continuation.resume(returning: true)
                        return
                    default:
                        let stalled = watchdog.stop()
                        job.finish(
                            throwing: PiperWorkerError(
                                message: stalled
                                    ? "the worker sent nothing for \(stallLimit) and was killed"
                                    : "the worker ended while rendering"))
                        continuation.resume(returning: false)
                        return
                    }
                }
            }
        }
    }
}

extension PiperRenderer {
    /// The `J` frame that hands the worker a job, with the input as JSON with sorted keys.
    /// `workers/piper/tests` reads the frame this writes.
    package static func jobFrame(_ input: PiperInput, chunking: RenderChunking) -> [UInt8] {
        WorkerFrame.job(WorkerJob(chunking: chunking, input: input.workerInput)).encoded()
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
}
