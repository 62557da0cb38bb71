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
    public func play<Chunks: AsyncSequence>(
        _ chunks: Chunks, format: AudioFormat, trailingPause: Duration = .zero, silenceBefore least: Duration = .zero,
        on sink: any AudioSink
    ) async throws where Chunks.Element == PCMChunk {
        var trimmer = TrailingSilenceTrimmer(format: format, threshold: silenceThreshold)
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
                    try await sink.write(part)
                }
            }
            try Task.checkCancellation()
            let (playedSilence, events) = trimmer.finish()
            let pauseFrames = format.byteCount(for: trailingPause) / format.bytesPerFrame
            let padFrames = max(0, pauseFrames - playedSilence)
            if padFrames > 0 || !events.isEmpty {
                try await sink.write(
                    PCMChunk(samples: Array(repeating: 0, count: padFrames * format.channels), events: events))
            }
            try await sink.drain()
            if trimmer.hasSounded {
                lastSound.note(ContinuousClock.now - format.duration(frames: max(pauseFrames, playedSilence)))
            }
        } catch {
            // Flushing is short and bounded by the sink, and it is how a cancel becomes silence,
            // so it runs even though this task is cancelled.
            try? await sink.flush()
            if trimmer.hasSounded { lastSound.note(.now) }
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw error
        }
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
