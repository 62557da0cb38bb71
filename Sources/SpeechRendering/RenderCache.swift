import Logging
import SpeechModel
import Synchronization

/// Rendered speech kept in memory, and on disk when given a directory, keyed by everything that
/// changes its sound, bounded in bytes, the least recently used going first (`CachingRenderer`
/// fills and reads it).
///
/// The key is the prepared utterance (the text, its spans and values, the voice each span
/// resolved to and the engine input compiled from them), how it was cut into chunks, and an
/// identity the daemon gives for what the engines are (their names and versions, their data and
/// the sample rate): a changed voice, setting or engine never meets an entry made before it.
/// Only the audio the engine made is kept; the output's gain and chimes are added at play time.
///
/// On disk (`RenderCacheDisk`) the key is written as bytes that are the same in every process
/// (`RenderKeyWriter`), so an entry is found again after a restart. A miss in memory looks on
/// disk, and a hit there is kept in memory again. A render whose engine input cannot be written
/// so is kept in memory only.
public final class RenderCache: Sendable {
    /// What the cache has done, for `/metrics`.
    public struct Statistics: Sendable, Hashable {
        /// Renders played from memory.
        public var hits = 0
        /// Renders the engines made: found neither in memory nor on disk.
        public var misses = 0
        public var evictions = 0
        /// The bytes of audio held in memory.
        public var bytes = 0
        public var entries = 0
        /// Renders read from disk.
        public var diskHits = 0
        /// Files removed from disk for room.
        public var diskEvictions = 0
        /// The bytes of the files held on disk.
        public var diskBytes = 0
        public var diskEntries = 0

        public init() {}
    }

    struct Key: Hashable, Sendable {
        let prepared: PreparedUtterance
        let chunking: RenderChunking
        let identity: String
    }

    private struct State {
        var entries = RecencyList<Key, [PCMChunk]>()
        /// Hits and misses; the rest is read from `entries`.
        var statistics = Statistics()
    }

    /// The most bytes of audio held in memory.
    public let capacity: Int
    /// The largest render kept in memory: a quarter of the capacity, so one long text cannot empty it.
    public var maxEntryBytes: Int { capacity / 4 }
    /// The tier on disk; nil when there is none, or its directory could not be used.
    let disk: RenderCacheDisk?
    private let state = Mutex(State())

    /// - Parameters:
    ///   - capacity: the most bytes of audio held in memory.
    ///   - diskDirectory: where renders are kept on disk too; nil for memory only. It is made
    ///     when missing; one that cannot be used leaves the cache in memory only, with a warning.
    ///   - diskCapacity: the most bytes of files held there; 0 for memory only.
    ///   - logger: where the disk tier says it is off.
    public init(
        capacity: Int, diskDirectory: String? = nil, diskCapacity: Int = 0,
        logger: Logger = Logger(label: "speakd.render-cache")
    ) {
        self.capacity = max(0, capacity)
        disk = diskDirectory.flatMap { directory in
            diskCapacity > 0 ? RenderCacheDisk(directory: directory, capacity: diskCapacity, logger: logger) : nil
        }
    }

    /// Whether anything is kept: in memory, on disk, or both.
    public var isEnabled: Bool { capacity > 0 || disk != nil }

    /// Whether renders are kept on disk.
    public var keepsRendersOnDisk: Bool { disk != nil }

    /// The largest render kept in memory or on disk.
    var maxKeptBytes: Int { max(maxEntryBytes, disk?.maxEntryBytes ?? 0) }

    public var statistics: Statistics {
        var statistics = state.withLock { state in
            var statistics = state.statistics
            statistics.bytes = state.entries.bytes
            statistics.entries = state.entries.count
            statistics.evictions = state.entries.evictions
            return statistics
        }
        if let disk = disk?.statistics {
            statistics.diskHits = disk.hits
            statistics.diskEvictions = disk.evictions
            statistics.diskBytes = disk.bytes
            statistics.diskEntries = disk.entries
        }
        return statistics
    }

    /// The chunks of `key` in memory, counting a hit.
    func chunks(for key: Key) -> [PCMChunk]? {
        state.withLock { state in
            guard let chunks = state.entries.use(key) else { return nil }
            state.statistics.hits += 1
            return chunks
        }
    }

    /// Counts a render the engines make.
    func countMiss() {
        state.withLock { $0.statistics.misses += 1 }
    }

    /// `key` as the disk tier names it; nil without one, or when the key cannot be written.
    func stored(_ key: Key) -> RenderCacheDisk.Key? {
        guard disk != nil else { return nil }
        var writer = RenderKeyWriter()
        writer.write(key.identity)
        writer.write(key.chunking == .streaming ? 0 : 1)
        writer.write(key.prepared)
        return writer.isComplete ? RenderCacheDisk.Key(bytes: writer.bytes) : nil
    }

    /// The chunks stored on disk under `stored`, kept in memory again under `key`.
    func load(_ key: Key, stored: RenderCacheDisk.Key) async -> [PCMChunk]? {
        guard let disk, let chunks = await disk.load(stored) else { return nil }
        insert(chunks, bytes: chunks.reduce(0) { $0 + Self.bytes(of: $1) }, for: key)
        return chunks
    }

    /// Keeps a whole render in memory, evicting the least recently used until it fits.
    func insert(_ chunks: [PCMChunk], bytes: Int, for key: Key) {
        guard bytes <= maxEntryBytes else { return }
        state.withLock { $0.entries.insert(chunks, bytes: bytes, for: key, capacity: capacity) }
    }

    /// The bytes a chunk holds.
    static func bytes(of chunk: PCMChunk) -> Int { chunk.samples.count * MemoryLayout<Int16>.size }
}

/// A renderer in front of the engines that plays a render it has made before from the cache
/// (`RenderCache`): the same chunks, the same word, sentence and mark events, at once.
///
/// A miss is rendered by the engine behind it and handed on chunk by chunk as it is pulled, so
/// the engine's own pace and its bound on audio ahead stay as they were; a render that ends
/// whole is kept, in memory and on disk, before the stream ends. One cancelled, failed or over
/// a quarter of the cache is not. A private utterance is never kept, nor looked up, in memory or
/// on disk. Renders for playback (`.streaming`) and whole ones (`.whole`, `POST /v1/speech`) are
/// kept apart: their chunks are cut differently.
public struct CachingRenderer: ForwardingRenderer {
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

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        // Playback (`.streaming`) and files (`.whole`: `POST /v1/speech`, the loudness
        // calibration) alike, each under its own key: a text rendered to a file again is answered
        // from the cache, with no work beyond this lookup.
        guard !prepared.isPrivate, cache.isEnabled else {
            return base.render(prepared, chunking: chunking)
        }
        let key = RenderCache.Key(prepared: prepared, chunking: chunking, identity: "\(identity) \(format)")
        if let chunks = cache.chunks(for: key) { return .replaying(chunks) }
        let stored = cache.stored(key)
        let (base, cache) = (base, cache)
        let render = { @Sendable in
            cache.countMiss()
            return Tee(base.render(prepared, chunking: chunking), cache: cache, key: key, stored: stored)
        }
        guard let stored, cache.disk?.mayHold(stored) == true else {
            let tee = render()
            return AsyncThrowingStream(unfolding: { try await tee.next() })
        }
        let lookup = DiskFirst(cache: cache, key: key, stored: stored, render: render)
        return AsyncThrowingStream(unfolding: { try await lookup.next() })
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
        private let stored: RenderCacheDisk.Key?

        init(
            _ stream: AsyncThrowingStream<PCMChunk, any Error>, cache: RenderCache, key: RenderCache.Key,
            stored: RenderCacheDisk.Key?
        ) {
            self.iterator = stream.makeAsyncIterator()
            self.cache = cache
            self.key = key
            self.stored = stored
        }

        func next() async throws -> PCMChunk? {
            guard let chunk = try await iterator.next() else {
                let whole = kept
                kept = nil
                if let whole, !Task.isCancelled {
                    cache.insert(whole, bytes: bytes, for: key)
                    // On disk before the stream ends: a render ahead (`POST /v1/prerender`) is
                    // kept across a restart once it is answered.
                    if let stored { await cache.disk?.store(whole, bytes: bytes, for: stored) }
                }
                return nil
            }
            if kept != nil {
                bytes += RenderCache.bytes(of: chunk)
                if bytes > cache.maxKeptBytes { kept = nil } else { kept?.append(chunk) }
            }
            return chunk
        }
    }

    /// Looks on disk before the engine renders: a render found there is played from it, and
    /// otherwise the engine's is handed on as `Tee` hands it.
    // @unchecked Sendable: only the stream's consumer calls `next()`, one call at a time, as for `Tee`.
    private final class DiskFirst: @unchecked Sendable {
        private let cache: RenderCache
        private let key: RenderCache.Key
        private let stored: RenderCacheDisk.Key
        private let render: @Sendable () -> Tee
        private var found: IndexingIterator<[PCMChunk]>?
        private var tee: Tee?

        init(
            cache: RenderCache, key: RenderCache.Key, stored: RenderCacheDisk.Key, render: @escaping @Sendable () -> Tee
        ) {
            self.cache = cache
            self.key = key
            self.stored = stored
            self.render = render
        }

        func next() async throws -> PCMChunk? {
            if found == nil, tee == nil {
                if let chunks = await cache.load(key, stored: stored) {
                    found = chunks.makeIterator()
                } else {
                    tee = render()
                }
            }
            if found != nil { return found!.next() }
            return try await tee!.next()
        }
    }
}
