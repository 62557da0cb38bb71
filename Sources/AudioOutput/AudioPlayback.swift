import SpeechModel
import SpeechRendering
import Synchronization

/// Plays a stream of chunks on a sink, start to end, and stops at once when cancelled.
///
/// The engine's silence at the end of a stream is not played (`TrailingSilenceTrimmer`), so
/// playing returns, and the announcement finishes, as soon as its last sounding sample has been
/// played; a pause asked for at the end is played in full instead. The pause between
/// consecutive streams is `gap`, written as silence before the next one.
public struct AudioPlayback: Sendable {
    /// Silence written before the first chunk: idle sound hardware can swallow the first
    /// syllable while it wakes up.
    public var leadIn: Duration
    /// The least time from the last sounding sample of one stream to the first sample of the
    /// next: what is missing when the next starts is written as silence before it.
    public var gap: Duration
    /// A sample sounds above this absolute value; quieter ones at the end of a stream are dropped.
    public var silenceThreshold: Int16
    /// When the last sounding sample played so far was played, shared by copies of this value
    /// (the daemon plays one stream at a time through one of them).
    private let lastSound = LastSound()

    /// - Parameters:
    ///   - leadIn: silence before the first chunk; zero for none.
    ///   - gap: least silence between the last sound of one stream and the next; zero for none.
    ///   - silenceThreshold: the absolute sample value above which a sample sounds.
    public init(leadIn: Duration = .zero, gap: Duration = .zero, silenceThreshold: Int16 = 64) {
        self.leadIn = leadIn
        self.gap = gap
        self.silenceThreshold = silenceThreshold
    }

    /// Writes `chunks` to `sink` as they arrive, except the near-silent end of the stream, then
    /// `trailingPause` of silence, then drains the sink, so returning means the last sample has
    /// been played.
    ///
    /// When the calling task is cancelled the sink is flushed at once, so speech stops mid-word
    /// rather than at the end of a buffer, and `CancellationError` is thrown. On any other error
    /// (from the stream or the sink) the sink is flushed too and the error rethrown.
    /// - Parameters:
    ///   - chunks: the audio, in `format`.
    ///   - format: the format of the chunks (sizes the lead-in, the gap and the pause).
    ///   - trailingPause: silence asked for after the last sound (a last span's `pauseAfter`),
    ///     played as part of this stream; the engine's own silence there counts towards it.
    ///   - silenceBefore: silence written before the first chunk, at least (a repeat's gap:
    ///     written, not waited, so the stream and its ducking stay on through it).
    ///   - sink: where to play.
    ///   - observer: told when the stream's engine events, its first sample and its last sound
    ///     are heard; nil when nobody asks.
    public func play<Chunks: AsyncSequence>(
        _ chunks: Chunks, format: AudioFormat, trailingPause: Duration = .zero, silenceBefore least: Duration = .zero,
        on sink: any AudioSink, observer: PlaybackObserver? = nil
    ) async throws where Chunks.Element == PCMChunk {
        var trimmer = TrailingSilenceTrimmer(format: format, threshold: silenceThreshold)
        var timeline = observer.map { PlayTimeline(format: format, observer: $0) }
        do {
            try Task.checkCancellation()
            let silenceBefore = max(leadIn, lastSound.remainingGap(gap), least)
            let silenceBytes = format.byteCount(for: silenceBefore)
            if silenceBytes > 0 {
                try await sink.write(PCMChunk(samples: Array(repeating: 0, count: silenceBytes / 2)))
            }
            for try await chunk in chunks {
                try Task.checkCancellation()
                if let part = trimmer.push(chunk) {
                    if timeline != nil {
                        try await timeline!.write(part, to: sink)
                    } else {
                        try await sink.write(part)
                    }
                }
            }
            try Task.checkCancellation()
            let (playedSilence, events) = trimmer.finish()
            // Events held with the dropped silence are heard when the last sound ends.
            timeline?.finishEvents(events, on: sink)
            let pauseFrames = format.byteCount(for: trailingPause) / format.bytesPerFrame
            let padFrames = max(0, pauseFrames - playedSilence)
            if padFrames > 0 {
                try await sink.write(PCMChunk(samples: Array(repeating: 0, count: padFrames * format.channels)))
            }
            try await sink.drain()
            let soundEnded = ContinuousClock.now - format.duration(frames: max(pauseFrames, playedSilence))
            if trimmer.hasSounded {
                lastSound.note(soundEnded)
            }
            // Every event is due by now; waiting for the last keeps them ahead of what follows.
            await timeline?.scheduler.finish()
            if trimmer.hasSounded { observer?.lastSound(soundEnded) }
        } catch {
            await timeline?.scheduler.cancel()
            // Flushing is short and bounded by the sink, and it is how a cancel becomes silence,
            // so it runs even though this task is cancelled.
            try? await sink.flush()
            if trimmer.hasSounded { lastSound.note(.now) }
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw error
        }
    }
}

/// What wants to know when a stream is heard: each engine event when the sink plays its first
/// sample, the first sample of the stream, and the end of its last sound.
public struct PlaybackObserver: Sendable {
    /// An engine event, called at about the instant the sink plays its first sample.
    public var event: @Sendable (EngineEvent) -> Void
    /// The instant the stream's first sample is played (the sink's estimate), called once when
    /// it is written.
    public var firstSample: @Sendable (ContinuousClock.Instant) -> Void
    /// The instant its last sounding sample ended, called once the sink has played it all.
    public var lastSound: @Sendable (ContinuousClock.Instant) -> Void

    public init(
        event: @escaping @Sendable (EngineEvent) -> Void,
        firstSample: @escaping @Sendable (ContinuousClock.Instant) -> Void = { _ in },
        lastSound: @escaping @Sendable (ContinuousClock.Instant) -> Void = { _ in }
    ) {
        self.event = event
        self.firstSample = firstSample
        self.lastSound = lastSound
    }
}

/// Places a stream's engine events on the sink's clock: a part is written up to each event's
/// sample, so right after that write the sink's `playedOutAt` is when the event's first sample
/// will be heard, and the event is scheduled for then. Sinks without a clock fire on writing.
struct PlayTimeline {
    let format: AudioFormat
    let observer: PlaybackObserver
    let scheduler: PlayedEventScheduler
    /// Frames of the stream written so far (the lead-in not counted).
    private var written = 0
    /// Events whose sample has not been written yet.
    private var pending: [EngineEvent] = []
    private var reportedFirst = false

    init(format: AudioFormat, observer: PlaybackObserver) {
        self.format = format
        self.observer = observer
        self.scheduler = PlayedEventScheduler(deliver: observer.event)
    }

    /// When what was written so far will have been heard: the sink's estimate, or now.
    private func playedOut(_ sink: any AudioSink) -> ContinuousClock.Instant {
        max(sink.playedOutAt ?? .now, .now)
    }

    mutating func write(_ part: PCMChunk, to sink: any AudioSink) async throws {
        let channels = max(1, format.channels)
        pending += part.events
        let frames = part.samples.count / channels
        var start = 0
        while start < frames {
            // Up to and including the first frame of the next event, so the sink's estimate
            // right after the write, fresh whatever was written before, places that frame.
            var end = frames
            if let next = pending.first.map({ $0.sample - written }), next < frames {
                end = max(start + 1, next + 1)
            }
            try await sink.write(PCMChunk(samples: Array(part.samples[(start * channels)..<(end * channels)])))
            start = end
            let heard = playedOut(sink)
            if !reportedFirst {
                reportedFirst = true
                observer.firstSample(heard - format.duration(frames: start))
            }
            let due = pending.prefix { $0.sample - written < start }
            guard !due.isEmpty else { continue }
            scheduler.schedule(
                due.map { event in
                    (max(.now, heard - format.duration(frames: start - max(0, event.sample - written))), event)
                })
            pending.removeFirst(due.count)
        }
        written += frames
    }

    /// Schedules what is left (events beyond the last sound) for when the last written sample ends.
    mutating func finishEvents(_ events: [EngineEvent], on sink: any AudioSink) {
        pending += events
        guard !pending.isEmpty else { return }
        scheduler.schedule(pending.map { (playedOut(sink), $0) })
        pending = []
    }
}

/// Fires events at instants, in order; cancelling drops those not yet fired.
final class PlayedEventScheduler: Sendable {
    private let deliver: @Sendable (EngineEvent) -> Void
    private let tasks = Mutex<[Task<Void, Never>]>([])

    init(deliver: @escaping @Sendable (EngineEvent) -> Void) {
        self.deliver = deliver
    }

    /// Fires each event at its instant (at once when that has passed), after all scheduled before.
    func schedule(_ items: [(ContinuousClock.Instant, EngineEvent)]) {
        let deliver = self.deliver
        tasks.withLock { tasks in
            let previous = tasks.last
            tasks.append(
                Task {
                    await previous?.value
                    for (instant, event) in items {
                        if instant > .now { try? await Task.sleep(until: instant, tolerance: .milliseconds(1)) }
                        if Task.isCancelled { return }
                        deliver(event)
                    }
                })
        }
    }

    /// Returns once every scheduled event has fired.
    func finish() async {
        let last = tasks.withLock { $0.last }
        await last?.value
    }

    /// Drops the events not yet fired; returns once none can fire any more.
    func cancel() async {
        let all = tasks.withLock { $0 }
        for task in all { task.cancel() }
        for task in all { await task.value }
    }
}

/// When the last sounding sample was played.
private final class LastSound: Sendable {
    private let instant = Mutex<ContinuousClock.Instant?>(nil)

    func note(_ playedAt: ContinuousClock.Instant) {
        instant.withLock { $0 = playedAt }
    }

    /// What is left of `gap` after the last sound, now.
    func remainingGap(_ gap: Duration) -> Duration {
        guard gap > .zero, let last = instant.withLock({ $0 }) else { return .zero }
        return max(.zero, gap - (ContinuousClock.now - last))
    }
}
