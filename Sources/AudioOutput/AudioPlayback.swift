import SpeechModel
import SpeechRendering

/// Plays a stream of chunks on a sink, start to end, and stops at once when cancelled.
public struct AudioPlayback: Sendable {
    /// Silence written before the first chunk: idle sound hardware can swallow the first
    /// syllable while it wakes up.
    public var leadIn: Duration

    /// - Parameter leadIn: silence before the first chunk; zero for none.
    public init(leadIn: Duration = .zero) {
        self.leadIn = leadIn
    }

    /// Writes `chunks` to `sink` as they arrive, then drains it, so returning means the last
    /// sample has been played.
    ///
    /// When the calling task is cancelled the sink is flushed at once, so speech stops mid-word
    /// rather than at the end of a buffer, and `CancellationError` is thrown. On any other error
    /// (from the stream or the sink) the sink is flushed too and the error rethrown.
    /// - Parameters:
    ///   - chunks: the audio, in `format`.
    ///   - format: the format of the chunks (sizes the lead-in).
    ///   - sink: where to play.
    public func play<Chunks: AsyncSequence>(
        _ chunks: Chunks, format: AudioFormat, on sink: any AudioSink
    ) async throws where Chunks.Element == PCMChunk {
        do {
            try Task.checkCancellation()
            let leadInBytes = format.byteCount(for: leadIn)
            if leadInBytes > 0 {
                try await sink.write(PCMChunk(samples: Array(repeating: 0, count: leadInBytes / 2)))
            }
            for try await chunk in chunks {
                try Task.checkCancellation()
                try await sink.write(chunk)
            }
            try Task.checkCancellation()
            try await sink.drain()
        } catch {
            // Flushing is short and bounded by the sink, and it is how a cancel becomes silence,
            // so it runs even though this task is cancelled.
            try? await sink.flush()
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw error
        }
    }
}
