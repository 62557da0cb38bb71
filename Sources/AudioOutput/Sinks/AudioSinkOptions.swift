import SpeechModel
import SpeechRendering

/// Latency and time limits shared by the device sinks.
public struct AudioSinkOptions: Sendable, Hashable {
    /// The longest opening or connecting to the device may take.
    public var openTimeout: Duration
    /// The longest a single device call (a 10 ms piece of a write, a drain, a flush) may block
    /// before the device counts as wedged. Keep it well above `targetLatency`.
    public var callTimeout: Duration
    /// How much audio the device buffers ahead of playback. Smaller stops sooner on flush;
    /// too small underruns on a busy machine.
    public var targetLatency: Duration
    /// The client name the sound server shows (PulseAudio's application name).
    public var applicationName: String
    /// PulseAudio: how long after the last announcement the stream is closed; nil keeps it open.
    /// The sound server ducks other streams while a stream with a ducking role exists, even a
    /// silent one, so a tagged stream must go away for the music to come back.
    public var releaseAfterIdle: Duration? = nil
    /// PulseAudio: the `media.role` of the stream, for the server's ducking (`announcement`); nil
    /// for none. It tags this stream alone: other sinks, ALSA through the pulse plugin included,
    /// carry no role.
    public var mediaRole: String? = nil
    /// The name of the output the sink plays for: an RTP stream's SSRC and session name come
    /// from it.
    public var outputName: String = "default"
    /// Where an RTP sink counts what it sends; nil counts for no one.
    public var rtpStatistics: RTPStatistics? = nil

    /// - Parameters:
    ///   - openTimeout: limit for opening or connecting.
    ///   - callTimeout: limit for any other single device call.
    ///   - targetLatency: audio buffered ahead of playback.
    ///   - applicationName: the client name shown by the sound server.
    public init(
        openTimeout: Duration = .seconds(3),
        callTimeout: Duration = .seconds(2),
        targetLatency: Duration = .milliseconds(50),
        applicationName: String = "speakd"
    ) {
        self.openTimeout = openTimeout
        self.callTimeout = callTimeout
        self.targetLatency = targetLatency
        self.applicationName = applicationName
    }
}

extension AudioFormat {
    /// Bytes of `duration` of audio in this format, rounded down to whole frames.
    func byteCount(for duration: Duration) -> Int {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        return Int(seconds * Double(sampleRate)) * bytesPerFrame
    }

    /// How long `frames` frames play.
    func duration(frames: Int) -> Duration {
        .nanoseconds(Int64(frames) * 1_000_000_000 / Int64(sampleRate))
    }
}

extension Duration {
    var microseconds: Int64 {
        components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000
    }
}
