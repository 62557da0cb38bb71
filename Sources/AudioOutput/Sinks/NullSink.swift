import SpeechModel
import SpeechRendering
import Synchronization

/// Discards audio, either at once (load tests, `--audio null`) or paced like a real device, so
/// writes and drains take as long as playing the audio would.
public final class NullSink<C: Clock>: ReopenableAudioSink where C.Duration == Duration {
    /// How the sink spends time.
    public enum Pacing: Sendable, Hashable {
        /// Every call returns at once.
        case immediate
        /// Like a device playing in real time that buffers `buffer` ahead: a write returns when
        /// what is queued fits in the buffer, a drain when the last sample would have played.
        case realTime(buffer: Duration)
    }

    public let format: AudioFormat
    public let pacing: Pacing
    private let clock: C
    private let state: Mutex<State>

    private struct State {
        /// When the last written sample would finish playing.
        var playedUntil: C.Instant?
        var framesWritten = 0
    }

    public var name: String { "null" }
    public var isAvailable: Bool { true }

    /// Frames written since the sink was made, for load tests.
    public var framesWritten: Int { state.withLock { $0.framesWritten } }

    /// - Parameters:
    ///   - format: the sample format of every chunk written.
    ///   - pacing: discard at once, or take real time like a device.
    ///   - clock: the clock real-time pacing waits on.
    public init(format: AudioFormat, pacing: Pacing = .immediate, clock: C) {
        self.format = format
        self.pacing = pacing
        self.clock = clock
        self.state = Mutex(State())
    }

    public func write(_ chunk: PCMChunk) async throws {
        try Task.checkCancellation()
        let frames = chunk.samples.count / max(1, format.channels)
        guard case .realTime(let buffer) = pacing else {
            state.withLock { $0.framesWritten += frames }
            return
        }
        let now = clock.now
        let playedUntil = state.withLock { state -> C.Instant in
            let start = state.playedUntil.map { max($0, now) } ?? now
            let end = start.advanced(by: format.duration(frames: frames))
            state.playedUntil = end
            state.framesWritten += frames
            return end
        }
        try await clock.sleep(until: playedUntil.advanced(by: .zero - buffer), tolerance: nil)
    }

    public func drain() async throws {
        guard case .realTime = pacing, let until = state.withLock({ $0.playedUntil }) else { return }
        try await clock.sleep(until: until, tolerance: nil)
    }

    public func flush() async throws {
        let now = clock.now
        state.withLock { $0.playedUntil = now }
    }

    public func reopen() async throws {}

    public func close() async {
        let now = clock.now
        state.withLock { $0.playedUntil = now }
    }
}

extension NullSink where C == ContinuousClock {
    /// A null sink on the continuous clock.
    public convenience init(format: AudioFormat, pacing: Pacing = .immediate) {
        self.init(format: format, pacing: pacing, clock: ContinuousClock())
    }
}
