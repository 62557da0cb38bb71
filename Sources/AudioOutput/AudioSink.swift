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

    /// Frames the device has taken since the sink was made, played or still queued; nil when
    /// the sink does not count them (then everything written counts as played).
    var framesTaken: Int? { get }

    /// Like `flush()`, and tells how many of the frames taken were discarded unplayed, so a
    /// pause can resume at the exact sample where the sound stopped; nil when the sink cannot tell.
    func flushCountingUnplayed() async throws -> Int?
}

extension AudioSink {
    public var framesTaken: Int? { nil }

    public func flushCountingUnplayed() async throws -> Int? {
        try await flush()
        return nil
    }
}
