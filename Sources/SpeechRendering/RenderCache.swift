import SpeechModel
import Synchronization

/// Rendered speech kept in memory, keyed by everything that changes its sound, bounded in
/// bytes, the least recently used going first (`CachingRenderer` fills and reads it).
///
/// The key is the prepared utterance (the text, its spans and values, the voice each span
/// resolved to and the engine input compiled from them), how it was cut into chunks, and an
/// identity the daemon gives for what the engines are (their names and versions, their data and
/// the sample rate): a changed voice, setting or engine never meets an entry made before it.
/// Only the audio the engine made is kept; the output's gain and chimes are added at play time.
public final class RenderCache: Sendable {
    /// What the cache has done, for `/metrics`.
    public struct Statistics: Sendable, Hashable {
        public var hits = 0
        public var misses = 0
        public var evictions = 0
        /// The bytes of audio held.
        public var bytes = 0
        public var entries = 0

        public init() {}
    }

    struct Key: Hashable, Sendable {
        let prepared: PreparedUtterance
        let chunking: RenderChunking
        let identity: String
    }

    private struct Entry {
        var chunks: [PCMChunk]
        var bytes: Int
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var clock: UInt64 = 0
        var statistics = Statistics()
    }

    /// The most bytes of audio held.
    public let capacity: Int
    /// The largest render kept: a quarter of the capacity, so one long text cannot empty it.
    public var maxEntryBytes: Int { capacity / 4 }
    private let state = Mutex(State())

    /// - Parameter capacity: the most bytes of audio held.
    public init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// The chunks of `key`, counting a hit or a miss.
    func chunks(for key: Key) -> [PCMChunk]? {
        state.withLock { state in
            state.clock += 1
            guard var entry = state.entries[key] else {
                state.statistics.misses += 1
                return nil
            }
            entry.lastUse = state.clock
            state.entries[key] = entry
            state.statistics.hits += 1
            return entry.chunks
        }
    }

    /// Keeps a whole render, evicting the least recently used until it fits.
    func insert(_ chunks: [PCMChunk], bytes: Int, for key: Key) {
        guard bytes <= maxEntryBytes else { return }
        state.withLock { state in
            state.clock += 1
            if let old = state.entries.removeValue(forKey: key) { state.statistics.bytes -= old.bytes }
            while state.statistics.bytes + bytes > capacity,
                let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })
            {
                state.entries[oldest.key] = nil
                state.statistics.bytes -= oldest.value.bytes
                state.statistics.evictions += 1
            }
            state.entries[key] = Entry(chunks: chunks, bytes: bytes, lastUse: state.clock)
            state.statistics.bytes += bytes
            state.statistics.entries = state.entries.count
        }
    }

    /// The bytes a chunk holds.
    static func bytes(of chunk: PCMChunk) -> Int { chunk.samples.count * MemoryLayout<Int16>.size }
}

/// A renderer in front of the engines that plays a render it has made before from memory
/// (`RenderCache`): the same chunks, the same word, sentence and mark events, at once.
///
/// A miss is rendered by the engine behind it and handed on chunk by chunk as it is pulled, so
/// the engine's own pace and its bound on audio ahead stay as they were; a render that ends
/// whole is kept. One cancelled, failed or over a quarter of the cache is not. A private
/// utterance is never kept, nor looked up, and only renders for playback (`.streaming`) are.
public struct CachingRenderer: SpeechRenderer {
    public let base: any SpeechRenderer
    public let cache: RenderCache
    /// What the engines are: their names, versions, data and sample rate (part of every key).
    public let identity: String

    /// - Parameters:
    ///   - base: the engines.
    ///   - cache: where renders are kept.
    ///   - identity: what the engines are; a change of it misses every entry made before.
    public init(base: any SpeechRenderer, cache: RenderCache, identity: String) {
        self.base = base
        self.cache = cache
        self.identity = identity
    }

    public var format: AudioFormat { base.format }
    public var engineName: String { base.engineName }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        try await base.prepare(utterance)
    }

    public func voices() async throws -> [VoiceInfo] {
        try await base.voices()
    }

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        // Playback only (`.streaming`): a whole render is a measurement (the loudness calibration)
        // or a file (`POST /v1/speech`), which nothing plays again from memory.
        guard !prepared.isPrivate, chunking == .streaming, cache.capacity > 0 else {
            return base.render(prepared, chunking: chunking)
        }
        let key = RenderCache.Key(prepared: prepared, chunking: chunking, identity: "\(identity) \(format)")
        if let chunks = cache.chunks(for: key) { return .replaying(chunks) }
        let tee = Tee(base.render(prepared, chunking: chunking), cache: cache, key: key)
        return AsyncThrowingStream(unfolding: { try await tee.next() })
    }

    /// Hands on the engine's chunks as they are pulled, keeping a copy for the cache.
    // @unchecked Sendable: only the stream's consumer calls `next()`, one call at a time
    // (AsyncThrowingStream(unfolding:) awaits each before the next).
    private final class Tee: @unchecked Sendable {
        private var iterator: AsyncThrowingStream<PCMChunk, any Error>.AsyncIterator
        private var kept: [PCMChunk]? = []
        private var bytes = 0
        private let cache: RenderCache
        private let key: RenderCache.Key

        init(_ stream: AsyncThrowingStream<PCMChunk, any Error>, cache: RenderCache, key: RenderCache.Key) {
            self.iterator = stream.makeAsyncIterator()
            self.cache = cache
            self.key = key
        }

        func next() async throws -> PCMChunk? {
            guard let chunk = try await iterator.next() else {
                if let kept, !Task.isCancelled { cache.insert(kept, bytes: bytes, for: key) }
                kept = nil
                return nil
            }
            if kept != nil {
                bytes += RenderCache.bytes(of: chunk)
                if bytes > cache.maxEntryBytes { kept = nil } else { kept?.append(chunk) }
            }
            return chunk
        }
    }
}
