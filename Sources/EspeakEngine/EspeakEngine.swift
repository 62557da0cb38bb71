import CEspeakNG
import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Speech from libespeak-ng: voices, utterances → espeak-ng SSML, PCM out as it is synthesised.
///
/// libespeak-ng keeps its state in process globals, so every engine in the process hands its
/// work to one dedicated thread that makes all espeak-ng calls, one job at a time. The public API
/// is `Sendable` and async; several engines (with different data directories) may exist, and the
/// thread re-initialises espeak-ng when it switches between them.
public final class EspeakEngine: SpeechRenderer {
    /// How an engine is set up.
    public struct Configuration: Sendable, Hashable {
        /// espeak-ng's data directory (`espeak-ng-data`); nil for the library's default.
        public var dataPath: String?
        /// A directory of extra espeak-ng voice variants (the project's `Voices/variants`), made
        /// available as `voice+name` without installing them; nil for none.
        public var variantsDirectory: String?
        /// Where the private data directory with those variants is built; nil for a directory
        /// under the system's temporary directory.
        public var runtimeDirectory: String?
        /// The variant applied to voices that name none (`speakd-kiosk`); nil for espeak's default.
        public var variant: String?
        /// Whether punctuation is spoken when an utterance does not say.
        public var speaksPunctuation: Bool
        /// espeak-ng's output buffer in milliseconds: the length of the first chunk (espeak-ng
        /// ignores values under 50).
        public var bufferMilliseconds: Int
        /// The length of later chunks in milliseconds: espeak-ng's blocks are joined up to this.
        public var chunkMilliseconds: Int
        /// Whether espeak-ng loads its synthesis data (phonemes, intonation, the default voice's
        /// dictionary: about 1.4 MB) when the engine starts. When false, the engine starts with
        /// the voice list only, and the data is loaded by the first rendering: for a daemon whose
        /// engine workers render, so that its own engine only validates, compiles and lists voices.
        /// `format` is then espeak-ng's rate for its own voices, 22050 Hz, before any rendering.
        public var loadsSynthesisAtStart: Bool

        /// - Parameters: see the properties of the same names.
        public init(
            dataPath: String? = nil, variantsDirectory: String? = nil, runtimeDirectory: String? = nil,
            variant: String? = nil, speaksPunctuation: Bool = false, bufferMilliseconds: Int = 50,
            chunkMilliseconds: Int = 1000, loadsSynthesisAtStart: Bool = true
        ) {
            self.dataPath = dataPath
            self.variantsDirectory = variantsDirectory
            self.runtimeDirectory = runtimeDirectory
            self.variant = variant
            self.speaksPunctuation = speaksPunctuation
            self.bufferMilliseconds = bufferMilliseconds
            self.chunkMilliseconds = chunkMilliseconds
            self.loadsSynthesisAtStart = loadsSynthesisAtStart
        }
    }

    /// A whole rendering, with where each span's audio starts.
    public struct Rendering: Sendable {
        /// Every sample of the utterance, in `format`.
        public var samples: [Int16]
        /// The engine's format (s16 mono at espeak-ng's rate).
        public var format: AudioFormat
        /// Start of each span's audio in seconds, in span order (nil if espeak-ng reported none).
        public var spanStarts: [Double?]
        /// The voice used for each span.
        public var spanVoices: [VoiceInfo]
    }

    /// s16 mono at espeak-ng's sample rate (22050 Hz for its own voices).
    public let format: AudioFormat
    /// espeak-ng, in this process or in workers.
    public var engineName: String { "espeak-ng" }
    /// libespeak-ng's version, as the library says it (`1.52.0`).
    public static var libraryVersion: String { String(cString: espeak_Info(nil)) }
    /// espeak-ng, its version, and its data directory (voices, dictionaries, variants).
    public var engineIdentities: [EngineIdentity] {
        [EngineIdentity(name: engineName, version: Self.libraryVersion, files: [dataPath])]
    }
    /// The configuration the engine was made with.
    public let configuration: Configuration
    /// The data directory espeak-ng is initialised with (the private overlay when there are variants).
    public let dataPath: String
    /// Resolves languages to voices for every utterance.
    public let voiceResolver: any VoiceResolving
    private let logger: Logger
    private let thread = EspeakThread.shared
    /// How the most recent synthesis ended: samples espeak-ng produced, and whether it was aborted.
    let lastSynthesis = Locked<(producedSamples: Int, aborted: Bool)?>(nil)

    /// Initialises espeak-ng with `configuration` and builds the voice resolver from its voices.
    ///
    /// - Parameters:
    ///   - configuration: data directory, variants, defaults.
    ///   - logger: where the engine logs (at debug and info).
    ///   - makeResolver: receives the voices espeak-ng offers and returns the resolver to use
    ///     (a catalog with overrides, typically).
    /// - Throws: `EspeakError` when the data is missing or unreadable (never exits the process),
    ///   or what `makeResolver` throws.
    public init(
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "speakd.espeak"),
        makeResolver: @Sendable ([VoiceInfo]) throws -> any VoiceResolving
    ) async throws {
        let thread = EspeakThread.shared
        var dataPath: String
        if let configured = configuration.dataPath {
            dataPath = configured
        } else {
            dataPath = await thread.run { session in session.defaultDataPath() }
        }
        if let variants = configuration.variantsDirectory {
            let runtime =
                configuration.runtimeDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
                ?? FileManager.default.temporaryDirectory
            // One overlay per process and configuration: a later engine must not pull the
            // directory from under an earlier one with different variants.
            let key = String(UInt64(bitPattern: Int64((dataPath + "\u{0}" + variants).hashValue)), radix: 36)
            EspeakDataOverlay.removeStale(in: runtime)
            let directory = runtime.appendingPathComponent("speakd-espeak-\(getpid())-\(key)", isDirectory: true)
            dataPath = try EspeakDataOverlay.build(systemData: dataPath, variants: variants, in: directory)
        }
        let path = dataPath
        let buffer = configuration.bufferMilliseconds
        let loadsSynthesis = configuration.loadsSynthesisAtStart
        let (sampleRate, rawVoices) = try await thread.run { session throws(EspeakError) in
            if loadsSynthesis {
                try session.prepare(dataPath: path, bufferMilliseconds: buffer)
            } else {
                session.prepareVoiceList(dataPath: path)
            }
            return (session.sampleRate, session.listVoices())
        }
        let voices = rawVoices.map { voice in
            VoiceInfo(
                identifier: voice.identifier, name: voice.name,
                languages: voice.languages.compactMap(EspeakLanguageName.bcp47).uniqued())
        }
        self.configuration = configuration
        self.dataPath = path
        self.format = AudioFormat(sampleRate: sampleRate)
        self.logger = logger
        self.voiceResolver = try makeResolver(voices)
        logger.info(
            "espeak-ng ready",
            metadata: ["espeak.data": "\(path)", "espeak.voices": "\(voices.count)", "espeak.rate": "\(sampleRate)"])
    }

    /// Initialises espeak-ng with `configuration` and resolves languages with `voiceResolver`.
    ///
    /// - Throws: `EspeakError` when the data is missing or unreadable.
    public convenience init(
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "speakd.espeak"),
        voiceResolver: any VoiceResolving
    ) async throws {
        try await self.init(configuration: configuration, logger: logger) { _ in voiceResolver }
    }

    /// The voices espeak-ng offers, each with the BCP 47 tags that resolve to it after the
    /// resolver's overrides (`VoiceResolving.servedVoices`), not espeak-ng's own language lists.
    public func voices() async throws -> [VoiceInfo] { voiceResolver.servedVoices }

    /// Checks ranges, resolves every span's language and converts its IPA, and compiles the
    /// result to espeak-ng's input (`EspeakInput`), without rendering; the error names the field
    /// (`spans[1].language`).
    public func prepare(_ utterance: Utterance) throws(SpeechInputError) -> PreparedUtterance {
        // A voice by name is one of espeak-ng's by its identifier (`roa/pt`), or refused by name:
        // never silently replaced by the language's voice.
        try utterance.checkHasNoClips()
        let (input, voices, textMap) = try compile(utterance)
        return PreparedUtterance(utterance: utterance, voices: voices, engineInput: input, textMap: textMap)
    }

    /// The input espeak-ng is given for `utterance` (for diagnostics and benchmarks): SSML, or
    /// plain text for a single span that needs no markup, with the voice and parameters.
    public func espeakInput(for utterance: Utterance) throws(SpeechInputError) -> EspeakInput {
        try compile(utterance).input
    }

    /// Renders `prepared`, which an `EspeakEngine` prepared: the first chunk (about 50 ms) as
    /// soon as espeak-ng has it, later ones every `chunkMilliseconds` of audio; `.whole` joins
    /// espeak-ng's blocks into chunks of up to ten seconds. Cancelling the consuming task or
    /// dropping the stream aborts the synthesis. An utterance another kind of renderer prepared
    /// fails the stream with `ForeignPreparationError`.
    public func render(
        _ prepared: PreparedUtterance, chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        .starting { stream(try prepared.input(as: EspeakInput.self), marks: nil, chunking: chunking) }
    }

    /// Prepares and renders `utterance`, for a caller that renders it once, at once (tests,
    /// benchmarks); a bad input fails the stream before any chunk.
    public func render(
        _ utterance: Utterance, chunking: RenderChunking = .streaming
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        .starting { stream(try compile(utterance).input, marks: nil, chunking: chunking) }
    }

    /// Renders `utterance` to the end and returns all of its audio, with each span's start.
    public func renderAll(_ utterance: Utterance) async throws -> Rendering {
        let marks = Locked<[Int: Int]>([:])
        let (input, voices, _) = try compile(utterance, marks: true)
        var samples: [Int16] = []
        for try await chunk in stream(input, marks: marks, chunking: .streaming) {
            samples += chunk.samples
        }
        let positions = marks.value
        let count = utterance.spans.count
        return Rendering(
            samples: samples, format: format,
            spanStarts: (0..<count).map { positions[$0].map { Double($0) / 1000 } },
            spanVoices: voices)
    }

    /// Renders `input` on the espeak thread and hands each chunk to `deliver` there, as it is
    /// made, with no stream or task in between: for a caller that forwards chunks at once (the
    /// engine worker writes them to its pipe). `finished` is called once, on the espeak thread,
    /// with nil when the rendering ended or was cancelled, or with the error.
    ///
    /// - Returns: what cancels the rendering; `finished` still follows.
    public func render(
        _ input: EspeakInput, chunking: RenderChunking = .streaming,
        deliver: @escaping @Sendable (PCMChunk) -> Void, finished: @escaping @Sendable ((any Error)?) -> Void
    ) -> RenderCancellation {
        synthesize(input, marks: nil, chunking: chunking, deliver: deliver, finished: finished)
    }

    /// Runs `body` on the espeak thread, between utterances, where it may call libespeak-ng
    /// directly: for benchmarks and calibration that measure espeak-ng itself.
    ///
    /// espeak-ng is initialised with this engine's data directory when `body` starts. `body` may
    /// set its own synth callback, voice and parameters, but must not initialise espeak-ng again;
    /// the engine restores its callback and reloads its voice afterwards.
    public func runExclusively<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let path = dataPath
        let buffer = configuration.bufferMilliseconds
        return try await thread.run { session throws in
            try session.prepare(dataPath: path, bufferMilliseconds: buffer)
            defer { session.restore() }
            return try body()
        }
    }

    private func compile(
        _ utterance: Utterance, marks: Bool = false
    ) throws(SpeechInputError) -> (input: EspeakInput, spanVoices: [VoiceInfo], textMap: TextOffsetMap) {
        try EspeakInput.make(
            utterance, resolver: voiceResolver, defaultPunctuation: configuration.speaksPunctuation,
            variant: configuration.variant, marks: marks)
    }

    private func stream(
        _ input: EspeakInput, marks: Locked<[Int: Int]>?, chunking: RenderChunking
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: PCMChunk.self)
        let cancellation = synthesize(
            input, marks: marks, chunking: chunking, deliver: { continuation.yield($0) },
            finished: { error in continuation.finish(throwing: error) })
        continuation.onTermination = { termination in
            if case .cancelled = termination { cancellation.cancel() }
        }
        return stream
    }

    private func synthesize(
        _ input: EspeakInput, marks: Locked<[Int: Int]>?, chunking: RenderChunking,
        deliver: @escaping @Sendable (PCMChunk) -> Void, finished: @escaping @Sendable ((any Error)?) -> Void
    ) -> RenderCancellation {
        let context = RenderContext(format: format, configuration: configuration, chunking: chunking, sink: deliver)
        let path = dataPath
        let buffer = configuration.bufferMilliseconds
        let logger = logger
        let lastSynthesis = self.lastSynthesis
        thread.submit { session in
            guard !context.isCancelled else {
                finished(nil)
                return
            }
            do throws(EspeakError) {
                try session.prepare(dataPath: path, bufferMilliseconds: buffer)
                let ended = try session.render(input, context: context)
                if !ended { logger.debug("espeak-ng synthesis aborted by its consumer") }
                lastSynthesis.set((context.producedSamples.load(ordering: .relaxed), !ended))
                marks?.set(context.marks.withLock { $0 })
                finished(nil)
            } catch {
                finished(error)
            }
        }
        return RenderCancellation(context)
    }
}

/// Cancels one rendering: espeak-ng aborts it at its next block.
public struct RenderCancellation: Sendable {
    private let context: RenderContext?

    init(_ context: RenderContext?) {
        self.context = context
    }

    /// Aborts the rendering; its `finished` still follows.
    public func cancel() { context?.cancel() }
}

extension Array where Element: Hashable {
    /// The elements in order, each only the first time it occurs.
    fileprivate func uniqued() -> [Element] {
        var seen: Set<Element> = []
        return filter { seen.insert($0).inserted }
    }
}
