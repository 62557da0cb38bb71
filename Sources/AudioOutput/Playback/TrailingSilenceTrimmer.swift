import SpeechRendering

/// Passes a stream of chunks through at once, except a run of near-silent frames at its end,
/// which it holds back and drops when the stream ends.
///
/// espeak-ng ends every utterance with about a third of a second of silence; played as part of
/// the announcement, it delays the moment the sink has played the announcement (and so its
/// `finished` event) by that much after the voice stopped. A silent run is held only until the
/// next sounding frame arrives, which releases it ahead of itself, so nothing inside the stream
/// is lost or moved and the first sound is not delayed. At most `maximumHeld` frames are held:
/// beyond that the oldest are released, and `finish()` counts them, so the caller can make up a
/// pause the user asked for at the end out of what was already played.
public struct TrailingSilenceTrimmer: Sendable {
    /// A frame sounds when any of its samples exceeds this absolute value (64 is about −54 dBFS).
    public let threshold: Int16
    /// Most frames held back at once.
    public let maximumHeld: Int
    /// Samples per frame.
    public let channels: Int

    /// The near-silent frames at the end of what was pushed so far, not yet released.
    private var held: [Int16] = []
    /// Frames of the current silent run already released because the hold was full.
    private var releasedOfRun = 0
    /// Engine events of chunks (or parts) held back, passed on with the next released samples.
    private var pendingEvents: [EngineEvent] = []
    /// Whether any sounding frame has been pushed.
    public private(set) var hasSounded = false

    /// - Parameters:
    ///   - format: the format of the chunks.
    ///   - threshold: the absolute sample value above which a frame sounds.
    ///   - maximumHeld: the longest silent run held back; longer runs are released from their start.
    public init(format: AudioFormat, threshold: Int16 = 64, maximumHeld: Duration = .seconds(1)) {
        self.channels = max(1, format.channels)
        self.threshold = threshold
        self.maximumHeld = max(0, format.byteCount(for: maximumHeld) / format.bytesPerFrame)
    }

    /// Frames held back now.
    public var heldFrames: Int { held.count / channels }

    /// Takes the next chunk; returns what to play now, or nil when all of it is held back.
    public mutating func push(_ chunk: PCMChunk) -> PCMChunk? {
        pendingEvents += chunk.events
        let samples = chunk.samples
        var out: [Int16] = []
        if let lastSounding = samples.lastIndex(where: { $0 > threshold || $0 < -threshold }) {
            // Up to the end of the frame holding the last sounding sample is released, with every
            // frame held before it; the rest of the chunk starts a new silent run.
            let end = min(samples.count, (lastSounding / channels + 1) * channels)
            out.reserveCapacity(held.count + end)
            out += held
            out += samples[..<end]
            held = Array(samples[end...])
            releasedOfRun = 0
            hasSounded = true
        } else {
            held += samples
        }
        let excess = held.count / channels - maximumHeld
        if excess > 0 {
            out += held[..<(excess * channels)]
            held.removeFirst(excess * channels)
            releasedOfRun += excess
        }
        guard !out.isEmpty else { return nil }
        defer { pendingEvents = [] }
        return PCMChunk(samples: out, events: pendingEvents)
    }

    /// The stream has ended: drops what is held back. Returns the frames of silence already
    /// played after the last sounding frame (released because the hold was full) and the engine
    /// events that came with held-back samples.
    public mutating func finish() -> (releasedSilentFrames: Int, events: [EngineEvent]) {
        let result = (releasedOfRun, pendingEvents)
        held = []
        releasedOfRun = 0
        pendingEvents = []
        return result
    }
}
