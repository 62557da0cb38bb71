import SpeechModel
import SpeechRendering

/// An `AudioSink` in front of a device that can fail and come back: what a daemon needs to
/// report health and reconnect with its own backoff.
public protocol ReopenableAudioSink: AudioSink {
    /// The sample format every written chunk must be in.
    var format: AudioFormat { get }

    /// False after a failed call until a call succeeds again, and while a device call that timed
    /// out still blocks. A sink that has not been used yet counts as available.
    var isAvailable: Bool { get }

    /// The failure that made the sink unavailable, while it is; nil when the sink cannot tell.
    var lastError: AudioOutputError? { get }

    /// Opens the device now (closing it first if open), to probe it or to recover after a
    /// failure. Throws `AudioOutputError` when it does not open.
    func reopen() async throws

    /// Calls `handler` each time the sink becomes unavailable (`isAvailable` turns false), from
    /// whichever thread noticed, so its owner learns of a failure outside any call it made (an
    /// idle stream's release, a call left overrunning) without asking at intervals. Replaces an
    /// earlier handler.
    func whenUnavailable(_ handler: @escaping @Sendable () -> Void)
}

extension ReopenableAudioSink {
    public var lastError: AudioOutputError? { nil }

    /// A sink that never fails by itself (null) has nothing to report.
    public func whenUnavailable(_ handler: @escaping @Sendable () -> Void) {}
}
