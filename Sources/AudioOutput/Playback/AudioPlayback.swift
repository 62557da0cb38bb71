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
    /// Pauses and resumes the stream being played.
    public let control = PlaybackControl()
    /// Silence written before the rest of a resumed stream: a sound server that starts a stream
    /// again mixes it into what its sink has rendered ahead already, and what it cannot take
    /// back (tens of milliseconds on a PulseAudio null sink) would cut off the first sound.
    static let resumeSilence = Duration.milliseconds(30)

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
        control.begin(on: sink)
        defer { control.end() }
        var tape = Tape(
            sink: sink, control: control, format: format,
            resumeSilence: format.byteCount(for: Self.resumeSilence) / 2)
        do {
            try Task.checkCancellation()
            let silenceBefore = max(leadIn, lastSound.remainingGap(gap), least)
            let silenceBytes = format.byteCount(for: silenceBefore)
            if silenceBytes > 0 {
                try await tape.put(PCMChunk(samples: Array(repeating: 0, count: silenceBytes / 2)))
            }
            tape.utteranceStart = tape.written
            // `started` goes with the first sample at twice the silence threshold: a soft onset
            // (a neural voice's) crosses the threshold itself a few samples early, and the sink's
            // gain and clock must never put the event before what a listener hears.
            tape.timeline = observer.map {
                PlayTimeline(format: format, observer: $0, soundThreshold: Int16(clamping: 2 * Int(silenceThreshold)))
            }
            for try await chunk in chunks {
                try Task.checkCancellation()
                if let part = trimmer.push(chunk) {
                    try await tape.put(part)
                }
            }
            try Task.checkCancellation()
            let (playedSilence, events) = trimmer.finish()
            let pauseFrames = format.byteCount(for: trailingPause) / format.bytesPerFrame
            let padFrames = max(0, pauseFrames - playedSilence)
            // Events held with the dropped silence are heard when the last sound ends.
            tape.timeline?.finishEvents(events, on: sink)
            if padFrames > 0 {
                try await tape.put(PCMChunk(samples: Array(repeating: 0, count: padFrames * format.channels)))
            }
            try await tape.drain()
            let soundEnded = ContinuousClock.now - format.duration(frames: max(pauseFrames, playedSilence))
            if trimmer.hasSounded {
                lastSound.note(soundEnded)
            }
            // Every event is due by now; waiting for the last keeps them ahead of what follows.
            await tape.timeline?.scheduler.finish()
            if trimmer.hasSounded { observer?.lastSound(soundEnded) }
        } catch {
            await tape.timeline?.scheduler.cancel()
            // Flushing is short and bounded by the sink, and it is how a cancel becomes silence,
            // so it runs even though this task is cancelled.
            try? await sink.flush()
            if trimmer.hasSounded { lastSound.note(.now) }
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw error
        }
    }
}

/// What one stream has written to the sink and not yet seen played, so a pause can take back
/// what the sink discarded and write it again on resume: nothing repeated, nothing skipped.
private struct Tape {
    let sink: any AudioSink
    let control: PlaybackControl
    let channels: Int
    let format: AudioFormat
    /// Samples of this stream written to the sink so far, lead-in included.
    var written = 0
    /// Where the utterance's own audio starts in the stream (after the lead-in), in samples.
    var utteranceStart = 0
    /// The last samples written, from stream position `keptFrom` to `written`.
    private var kept: [Int16] = []
    private var keptFrom = 0
    /// The sink's count of frames taken at this stream's position zero: when the stream
    /// started, moved on by what each pause's flush discarded (the sink counts those frames as
    /// taken; the stream writes them again).
    private var takenAtZero: Int?
    /// Word starts reported by the engine not yet written past, in utterance frames.
    private var wordStarts: [Int] = []
    /// How much is kept: far more than any sink buffers ahead of playback.
    private let keptLimit: Int

    /// Samples of silence written before the rest on resume.
    private let resumeSilence: Int
    /// Places the utterance's engine events on the sink's clock; nil when nobody listens (and
    /// during the lead-in, which is not the utterance's).
    var timeline: PlayTimeline?

    init(sink: any AudioSink, control: PlaybackControl, format: AudioFormat, resumeSilence: Int) {
        self.sink = sink
        self.control = control
        self.channels = max(1, format.channels)
        self.format = format
        self.resumeSilence = resumeSilence - resumeSilence % channels
        self.takenAtZero = sink.framesTaken
        self.keptLimit = 2 * 48_000 * channels
    }

    /// Writes `chunk`, pausing where a pause asks to, and when paused waits for the resume.
    mutating func put(_ chunk: PCMChunk) async throws {
        for event in chunk.events where event.kind == .word {
            wordStarts.append(event.sample)
        }
        var samples = chunk.samples
        var events = chunk.events
        var offset = 0
        while offset < samples.count {
            try Task.checkCancellation()
            if control.request == .now {
                samples = try await pauseNow(unwritten: Array(samples[offset...]))
                offset = 0
                continue
            }
            if control.request == .wordEnd, try await reachedWordStartInSink() {
                continue
            }
            var end = samples.count
            var cut = false
            if control.request == .wordEnd, let start = nextWordStart(within: samples.count - offset) {
                end = offset + (start - written)
                cut = true
            }
            if end > offset {
                let piece = Array(samples[offset..<end])
                keep(piece)
                try await write(PCMChunk(samples: piece, events: events))
                events = []
            }
            offset = end
            if control.request == .now {
                continue
            }
            if cut {
                samples = try await pauseAtWordEnd(unwritten: Array(samples[offset...]))
                offset = 0
            }
        }
    }

    /// Waits until the sink has played everything, pausing if asked to meanwhile.
    mutating func drain() async throws {
        while true {
            try Task.checkCancellation()
            if control.request == .now {
                let rest = try await pauseNow(unwritten: [])
                try await put(PCMChunk(samples: rest))
                continue
            }
            try await sink.drain()
            // A pause's flush ends the drain early; anything else means all was played.
            guard control.request == .now else { return }
        }
    }

    /// A pause at the end of a word when the next word starts in what the sink holds already
    /// (tens of milliseconds): waits until the sink is about to play that start, then pauses
    /// now, early by what the sink plays out after a flush, so the sound stops at the start.
    /// - Returns: true when it turned the pause into one now; false when no word starts there
    ///   (far enough ahead to stop at it), or the sink cannot tell when it plays what.
    private mutating func reachedWordStartInSink() async throws -> Bool {
        guard let playedOut = sink.playedOutAt else { return false }
        let playsOut = sink.heardAfterFlush ?? Self.heardAfterFlush
        let heardUpTo = written - format.byteCount(for: max(.zero, playedOut - .now) - playsOut) / 2
        let starts = wordStarts.map { utteranceStart + $0 * channels }
        guard let start = starts.filter({ $0 > max(heardUpTo, utteranceStart) && $0 < written }).min() else {
            return false
        }
        try await Task.sleep(until: playedOut - format.duration(frames: (written - start) / channels) - playsOut)
        control.pauseNowInsteadOfAtWordEnd()
        return true
    }

    /// What a flush is taken to leave to be heard before one has measured it.
    static let heardAfterFlush = Duration.milliseconds(10)

    /// The first word start after what is written and within the next `count` samples, in
    /// stream samples; the utterance's first word does not count (nothing would be heard).
    private mutating func nextWordStart(within count: Int) -> Int? {
        let startFrames = wordStarts.map { utteranceStart + $0 * channels }
        guard let start = startFrames.filter({ $0 > written && $0 > utteranceStart }).min(),
            start <= written + count
        else { return nil }
        return start
    }

    /// Writes `chunk`, through the timeline when there is one.
    private mutating func write(_ chunk: PCMChunk) async throws {
        if var placed = timeline {
            defer { timeline = placed }
            let control = self.control
            try await placed.write(chunk, to: sink, stopped: { control.request == .now })
        } else {
            try await sink.write(chunk)
        }
    }

    private mutating func keep(_ piece: [Int16]) {
        kept += piece
        written += piece.count
        let excess = kept.count - keptLimit
        if excess > 0 {
            kept.removeFirst(excess)
            keptFrom += excess
        }
    }

    /// The sink was flushed mid-stream: finds where the sound stopped, takes back what was not
    /// played and waits for the resume. Returns what to write next.
    private mutating func pauseNow(unwritten: [Int16]) async throws -> [Int16] {
        // Nothing of this stream is in flight now. The flush `pause` started is where the sound
        // stopped, unless a write raced it and was taken after it: then flush that too.
        var position = await control.awaitRequestedFlush()
        if position == nil || position?.taken != sink.framesTaken {
            position = try await sink.flushCountingUnplayed() ?? position
        }
        var played = written
        if let position, let start = takenAtZero {
            played = (position.played - start) * channels
        }
        played = min(max(played, keptFrom), written)
        let rest = Array(kept[(played - keptFrom)...]) + unwritten
        kept.removeLast(written - played)
        written = played
        // The sink goes on counting from where the flush left it; the stream from `played`.
        if let position, takenAtZero != nil { takenAtZero = position.taken - played / channels }
        // Events of what the flush discarded are heard again after the resume.
        if var moved = timeline {
            await moved.rewind(toFrame: max(0, played - utteranceStart) / channels)
            timeline = moved
        }
        try await control.pausedUntilResumed()
        return try await resumed(rest)
    }

    /// On resume: writes the silence, then returns `rest`, whose stream positions move by as much.
    private mutating func resumed(_ rest: [Int16]) async throws -> [Int16] {
        if written >= utteranceStart { utteranceStart += resumeSilence }
        let silence = [Int16](repeating: 0, count: resumeSilence)
        keep(silence)
        // Not the utterance's audio: the timeline does not count it.
        try await sink.write(PCMChunk(samples: silence))
        return rest
    }

    /// Written up to the start of the next word: waits for it to be played, then for the resume.
    private mutating func pauseAtWordEnd(unwritten: [Int16]) async throws -> [Int16] {
        try await sink.drain()
        if control.request == .now {
            // Asked to pause now while waiting for the word to end.
            return try await pauseNow(unwritten: unwritten)
        }
        try await control.pausedUntilResumed()
        return try await resumed(unwritten)
    }
}

/// What wants to know when a stream is heard: each engine event when the sink plays its first
/// sample, the first sample of the stream, its first audible sample, and the end of its last sound.
///
/// Each call carries, or is, the sink's estimate of when its sample is heard: the instant to
/// stamp it with, since the call itself comes a little after (`PlayTimeline.margin`), or later
/// when the sink placed it only once it had started.
public struct PlaybackObserver: Sendable {
    /// An engine event, called at about the instant the sink plays its first sample, with that
    /// instant (the sink's estimate).
    public var event: @Sendable (EngineEvent, ContinuousClock.Instant) -> Void
    /// The instant the stream's first sample is played (the sink's estimate), called once when
    /// it is written.
    public var firstSample: @Sendable (ContinuousClock.Instant) -> Void
    /// The instant its last sounding sample ended, called once the sink has played it all.
    public var lastSound: @Sendable (ContinuousClock.Instant) -> Void
    /// Called at about the instant the sink plays the stream's first audible sample (above the
    /// playback's silence threshold), once, in order with the engine events around it, with
    /// that instant (the sink's estimate).
    public var firstSound: @Sendable (ContinuousClock.Instant) -> Void

    public init(
        event: @escaping @Sendable (EngineEvent, ContinuousClock.Instant) -> Void,
        firstSample: @escaping @Sendable (ContinuousClock.Instant) -> Void = { _ in },
        lastSound: @escaping @Sendable (ContinuousClock.Instant) -> Void = { _ in },
        firstSound: @escaping @Sendable (ContinuousClock.Instant) -> Void = { _ in }
    ) {
        self.event = event
        self.firstSample = firstSample
        self.lastSound = lastSound
        self.firstSound = firstSound
    }
}

/// Places a stream's engine events on the sink's clock: a part is written up to each event's
/// sample, so right after that write the sink's `playedOutAt` is when the event's first sample
/// will be heard, and the event is scheduled for then. Sinks without a clock fire on writing.
///
/// The first audible sample is placed the same way, as an event of its own (`firstSoundMark`)
/// that goes to `observer.firstSound`, so it is heard in order with the words around it.
struct PlayTimeline {
    let format: AudioFormat
    let observer: PlaybackObserver
    /// The absolute sample value above which a sample is audible.
    let soundThreshold: Int16
    private(set) var scheduler: PlayedEventScheduler
    /// Frames of the stream written so far (the lead-in not counted).
    private var written = 0
    /// Events whose sample has not been written yet.
    private var pending: [EngineEvent] = []
    private var reportedFirst = false
    /// Whether the stream's first frame was written (alone, so the estimate after it places it).
    private var wroteFirstFrame = false
    /// The first frame written while the sink awaited its start (`AudioSink.framesToStart`):
    /// from it on, nothing is placed in time until a write after which the sink has started.
    private var undatedFrom: Int?
    /// Whether the first audible sample was found (and its event placed).
    private var foundSound = false

    /// The name of the event that stands for the first audible sample: no engine's mark, whose
    /// names carry a prefix (`EngineEvent.clientMarkPrefix`), and never delivered as a mark.
    static let firstSoundMark = "speakd:first-sound"

    init(format: AudioFormat, observer: PlaybackObserver, soundThreshold: Int16) {
        self.format = format
        self.observer = observer
        self.soundThreshold = soundThreshold
        self.scheduler = PlayedEventScheduler(deliver: Self.deliver(to: observer))
    }

    /// Delivers engine events to `observer.event`, and the first sound's to `observer.firstSound`.
    private static func deliver(to observer: PlaybackObserver)
        -> @Sendable (EngineEvent, ContinuousClock.Instant) -> Void
    {
        { event, heard in
            if event.kind == .mark, event.name == Self.firstSoundMark {
                observer.firstSound(heard)
            } else {
                observer.event(event, heard)
            }
        }
    }

    /// How long after its sample's estimated time (or after now, when the estimate is past) an
    /// event is fired. The estimate, from the sound server's timing report, is good to about a
    /// millisecond either way, and an event is promised never before its sound: aiming this much
    /// after keeps that promise, far inside the 20 ms in which it is promised to come. At a
    /// stream's very start the estimate and the heard sound were seen 1.1 ms apart, so a
    /// millisecond was not enough. A sound at a stream's very start is estimated as heard already
    /// when the write that starts the stream returns, at the moment the server plays it.
    static let margin = Duration.milliseconds(2)

    /// When what was written so far will have been heard: the sink's estimate, or now.
    private func playedOut(_ sink: any AudioSink) -> ContinuousClock.Instant {
        max(sink.playedOutAt ?? .now, .now)
    }

    /// Writes `part` in pieces cut at its events; stops between pieces once `stopped()` says so
    /// (a pause flushed the sink: what follows must not play), leaving the rest unwritten.
    mutating func write(_ part: PCMChunk, to sink: any AudioSink, stopped: () -> Bool = { false }) async throws {
        let channels = max(1, format.channels)
        pending += part.events
        if !foundSound, let index = part.samples.firstIndex(where: { $0 > soundThreshold || $0 < -soundThreshold }) {
            foundSound = true
            // Before the events at the same sample: `started` comes before the first word.
            let sample = written + index / channels
            let sound = EngineEvent(kind: .mark, sample: sample, textPosition: 0, name: Self.firstSoundMark)
            pending.insert(sound, at: pending.firstIndex { $0.sample >= sample } ?? pending.endIndex)
        }
        let frames = part.samples.count / channels
        var start = 0
        defer { written += start }
        // Frames the sink waits for before it starts, as it said after the last write.
        var toStart = sink.framesToStart
        while start < frames, !stopped() {
            // Up to and including the first frame of the next event, so the sink's estimate
            // right after the write, fresh whatever was written before, places that frame.
            var end = frames
            // (Events of frames already written wait there while the sink has not started.)
            if let next = pending.first(where: { $0.sample >= written + start }).map({ $0.sample - written }),
                next < frames
            {
                end = max(start + 1, next + 1)
            }
            // The very first frame alone, so the estimate right after it dates the first sample
            // itself, whatever silence comes before the first event.
            if !wroteFirstFrame { end = min(end, start + 1) }
            // While the sink waits for its start, the piece that starts it ends there, so the
            // estimate after it comes at once and places what waited.
            if toStart > 0 { end = min(end, start + toStart) }
            try await sink.write(PCMChunk(samples: Array(part.samples[(start * channels)..<(end * channels)])))
            wroteFirstFrame = true
            // Frames before `from` were placed by an earlier estimate, those from it by this one.
            let from = undatedFrom ?? (written + start)
            start = end
            toStart = sink.framesToStart
            if toStart > 0 {
                // Not playing yet: the frames are placed once the sink starts, by the estimate
                // after the write that starts it.
                undatedFrom = from
                continue
            }
            undatedFrom = nil
            let total = written + start
            let heard = playedOut(sink)
            if !reportedFirst {
                reportedFirst = true
                observer.firstSample(heard - format.duration(frames: total))
            }
            let due = pending.prefix { $0.sample < total }
            guard !due.isEmpty else { continue }
            scheduler.schedule(
                due.map { event in
                    let sounds = heard - format.duration(frames: total - max(from, event.sample))
                    return (max(.now, sounds) + Self.margin, sounds, event)
                })
            pending.removeFirst(due.count)
        }
    }

    /// The sink discarded what was written from utterance frame `frame` on (a pause): events
    /// not yet fired are taken back, those before `frame` fired now (they were heard), and the
    /// rest wait to be written again.
    mutating func rewind(toFrame frame: Int) async {
        let unfired = await scheduler.cancel()
        scheduler = PlayedEventScheduler(deliver: Self.deliver(to: observer))
        let heard = unfired.prefix { $0.event.sample < frame }
        let deliver = Self.deliver(to: observer)
        for (event, sounds) in heard { deliver(event, min(sounds, .now)) }
        pending = unfired.dropFirst(heard.count).map(\.event) + pending
        written = min(written, frame)
        undatedFrom = nil
    }

    /// Schedules what is left (events beyond the last sound) for when the last written sample ends.
    mutating func finishEvents(_ events: [EngineEvent], on sink: any AudioSink) {
        pending += events
        if !reportedFirst && wroteFirstFrame {
            // Too short to start the sink before the drain does: placed by the last estimate.
            reportedFirst = true
            observer.firstSample(playedOut(sink) - format.duration(frames: written))
        }
        guard !pending.isEmpty else { return }
        let ends = playedOut(sink)
        scheduler.schedule(pending.map { (ends, ends, $0) })
        pending = []
    }
}

/// Fires events at instants, in order, each with the instant its sample is heard; cancelling
/// drops those not yet fired.
final class PlayedEventScheduler: Sendable {
    private let deliver: @Sendable (EngineEvent, ContinuousClock.Instant) -> Void
    private let tasks = Mutex<[Task<Void, Never>]>([])
    /// Every event scheduled, in order, with when it is heard, and how many of them have fired
    /// (they fire in order).
    private let scheduled = Mutex<(events: [(event: EngineEvent, heard: ContinuousClock.Instant)], fired: Int)>(([], 0))

    init(deliver: @escaping @Sendable (EngineEvent, ContinuousClock.Instant) -> Void) {
        self.deliver = deliver
    }

    /// Fires each event at its instant (at once when that has passed), after all scheduled
    /// before, with the instant it is heard.
    func schedule(_ items: [(ContinuousClock.Instant, ContinuousClock.Instant, EngineEvent)]) {
        let deliver = self.deliver
        scheduled.withLock { $0.events += items.map { (event: $0.2, heard: $0.1) } }
        tasks.withLock { tasks in
            let previous = tasks.last
            tasks.append(
                Task { [self] in
                    await previous?.value
                    for (instant, heard, event) in items {
                        if instant > .now { try? await Task.sleep(until: instant, tolerance: .milliseconds(1)) }
                        // Counted and delivered under the lock, so a cancel sees each event
                        // either fired or not.
                        let fired = self.scheduled.withLock { state -> Bool in
                            if Task.isCancelled { return false }
                            state.fired += 1
                            return true
                        }
                        guard fired else { return }
                        deliver(event, heard)
                    }
                })
        }
    }

    /// Returns once every scheduled event has fired.
    func finish() async {
        let last = tasks.withLock { $0.last }
        await last?.value
    }

    /// Drops the events not yet fired and returns them, in order, with when each is heard,
    /// once none can fire any more.
    @discardableResult
    func cancel() async -> [(event: EngineEvent, heard: ContinuousClock.Instant)] {
        let all = tasks.withLock { $0 }
        for task in all { task.cancel() }
        for task in all { await task.value }
        return scheduled.withLock { Array($0.events[$0.fired...]) }
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
