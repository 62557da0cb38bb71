import SpeechRendering

/// Where rendered audio is played.
///
/// Every call returns or throws within a bounded time, even when the device behind the sink
/// blocks: a wedged device must never hang the caller.
public protocol AudioSink: Sendable {
    /// What the sink plays to, for health reports (`pulse`, `alsa:default`, `wav:/tmp/x.wav`).
    var name: String { get }

    /// Queues `chunk` for playback.
    func write(_ chunk: PCMChunk) async throws

    /// Returns when every sample written so far has been played.
    func drain() async throws

    /// Discards everything written but not yet played, so playback stops at once.
    func flush() async throws

    /// Releases the device. Further writes reopen it where the sink supports that.
    func close() async

    /// When everything written so far will have been played, as the sink estimated it right
    /// after its last write returned; nil when the sink does not know (it plays, or stores,
    /// what it is given at once). Read after a write, it places that write's samples in time.
    var playedOutAt: ContinuousClock.Instant? { get }

    /// Frames the device still waits for before it starts playing what was written (a
    /// PulseAudio stream short of its prebuffer), as the sink saw it right after its last write;
    /// 0 when it plays. Until it starts, `playedOutAt` cannot place what was written: the server
    /// starts the stream when the rest comes, and takes back what the sink had rendered ahead,
    /// so it plays at once, not after the sink's buffer as an estimate taken now would say.
    var framesToStart: Int { get }

    /// Frames the device has taken since the sink was made, played or still queued; nil when
    /// the sink does not count them (then everything written counts as played).
    var framesTaken: Int? { get }

    /// Like `flush()`, and tells where the sound stopped, so a pause can resume at that sample;
    /// nil when the sink cannot tell.
    func flushCountingUnplayed() async throws -> FlushPosition?

    /// What a flush leaves to be heard, as the last counting flush measured: a sink plays out
    /// what it cannot take back (a PulseAudio null sink, about its last block). Nil when not
    /// known.
    var heardAfterFlush: Duration? { get }
}

/// Where a flush stopped the sound, in frames counted since the sink was made.
public struct FlushPosition: Sendable, Hashable {
    /// Frames the device had taken when it was flushed (`AudioSink.framesTaken`).
    public var taken: Int
    /// Of those, the frames not yet heard, which the flush discarded.
    public var unplayed: Int

    /// Frames heard.
    public var played: Int { max(0, taken - unplayed) }
}

extension AudioSink {
    public var playedOutAt: ContinuousClock.Instant? { nil }

    public var framesToStart: Int { 0 }

    public var framesTaken: Int? { nil }

    public var heardAfterFlush: Duration? { nil }

    public func flushCountingUnplayed() async throws -> FlushPosition? {
        try await flush()
        return nil
    }
}
