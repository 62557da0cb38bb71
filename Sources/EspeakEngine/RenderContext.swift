import SpeechModel
import SpeechRendering
import Synchronization

/// One rendering in flight: where its chunks go and whether its consumer has gone away.
///
/// The synth callback reaches it through `user_data`; it holds only thread-safe state
/// (the closure chunks go to, and an atomic flag).
final class RenderContext: Sendable {
    /// Receives each chunk on the espeak thread.
    private let sink: @Sendable (PCMChunk) -> Void
    private let cancelled = Atomic<Bool>(false)
    /// Audio positions (ms) of `<mark name="N"/>` events, keyed by N; only the espeak thread writes them.
    let marks = Mutex<[Int: Int]>([:])

    /// Samples synthesised but not yet yielded; only the espeak thread touches them.
    private let pending = Mutex<[Int16]>([])
    /// Events reported but not yet yielded, in order; only the espeak thread touches them.
    private let pendingEvents = Mutex<[EngineEvent]>([])
    /// Chunks after the first are coalesced to at least this many samples.
    private let coalescedSamples: Int
    private let yieldedFirst = Atomic<Bool>(false)
    /// Samples espeak-ng produced for this rendering so far.
    let producedSamples = Atomic<Int>(0)

    /// The engine's sample rate, to turn espeak-ng's millisecond positions into samples.
    let sampleRate: Int

    /// Asked at each of espeak-ng's blocks whether the consumer wants the rendering aborted, for
    /// a caller that learns of a cancel only by looking (the engine worker reads its pipe).
    private let cancelRequested: (@Sendable () -> Bool)?

    /// - Parameter firstAtOnce: whether the first block goes out alone, at once.
    init(
        sampleRate: Int, coalescedSamples: Int, firstAtOnce: Bool,
        cancelRequested: (@Sendable () -> Bool)? = nil, sink: @escaping @Sendable (PCMChunk) -> Void
    ) {
        self.sampleRate = sampleRate
        self.sink = sink
        self.coalescedSamples = coalescedSamples
        self.cancelRequested = cancelRequested
        yieldedFirst.store(!firstAtOnce, ordering: .relaxed)
    }

    /// A rendering in `format` as `configuration` chunks it: the first block at once when
    /// streaming, later ones joined up to `chunkMilliseconds` (ten seconds for `.whole`).
    convenience init(
        format: AudioFormat, configuration: EspeakEngine.Configuration, chunking: RenderChunking,
        cancelRequested: (@Sendable () -> Bool)? = nil, sink: @escaping @Sendable (PCMChunk) -> Void
    ) {
        let milliseconds =
            chunking == .whole ? 10_000 : max(configuration.bufferMilliseconds, configuration.chunkMilliseconds)
        self.init(
            sampleRate: format.sampleRate, coalescedSamples: format.sampleRate * milliseconds / 1000,
            firstAtOnce: chunking == .streaming, cancelRequested: cancelRequested, sink: sink)
    }

    /// Records an event espeak-ng reported; it goes out with the next chunk.
    func record(_ event: EngineEvent) {
        pendingEvents.withLock { $0.append(event) }
    }

    /// Passes synthesised samples on: the first block at once (time to first sound), later ones
    /// in blocks of `coalescedSamples`, because waking the consumer for every 50 ms block that
    /// espeak-ng produces costs more CPU than synthesising it.
    func deliver(_ samples: UnsafeBufferPointer<CShort>) {
        producedSamples.add(samples.count, ordering: .relaxed)
        if !yieldedFirst.load(ordering: .relaxed) {
            yieldedFirst.store(true, ordering: .relaxed)
            sink(PCMChunk(samples: Array(samples), events: takeEvents()))
            return
        }
        let ready: [Int16]? = pending.withLock { buffer in
            buffer.append(contentsOf: samples)
            guard buffer.count >= coalescedSamples else { return nil }
            defer { buffer.removeAll(keepingCapacity: true) }
            return buffer
        }
        if let ready { sink(PCMChunk(samples: ready, events: takeEvents())) }
    }

    /// Yields whatever is still pending; called when synthesis has ended. Events after the last
    /// sample (a mark at the very end) go out in a chunk with no samples.
    func flush() {
        let rest = pending.withLock { buffer in
            defer { buffer.removeAll() }
            return buffer
        }
        let events = takeEvents()
        if !rest.isEmpty || !events.isEmpty { sink(PCMChunk(samples: rest, events: events)) }
    }

    private func takeEvents() -> [EngineEvent] {
        pendingEvents.withLock { events in
            defer { events.removeAll() }
            return events
        }
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Whether the synth callback should abort: cancelled, or the consumer asks for it now.
    func shouldAbort() -> Bool {
        if let cancelRequested, !isCancelled, cancelRequested() { cancel() }
        return isCancelled
    }

    /// Makes the synth callback abort the synthesis at its next call.
    func cancel() { cancelled.store(true, ordering: .releasing) }
}
