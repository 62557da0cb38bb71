import SpeechRendering

/// A sink whose device runs on a `DeviceSink` (ALSA, PulseAudio, a WAV file): the calls go to it
/// here once, so each sink says only how its device opens and what it does besides.
///
/// Public so the sinks' conformance is; not `open`: its subclasses are this module's.
// @unchecked Sendable: a class that is not final cannot be checked; its own stored properties
// are constants of Sendable types, and each subclass (all in this module) adds only constants and
// `Mutex`es.
public class DeviceBackedSink: ReopenableAudioSink, @unchecked Sendable {
    /// What of the device's playback position a sink reports; the rest reads as a sink that
    /// cannot tell (the `AudioSink` defaults).
    struct Reports: OptionSet {
        let rawValue: Int
        /// Frames taken and heard, when the audio will have played, and a counting flush.
        static let position = Reports(rawValue: 1 << 0)
        /// Frames the device holds back before it starts.
        static let startThreshold = Reports(rawValue: 1 << 1)
    }

    let core: DeviceSink
    private let reports: Reports

    init(core: DeviceSink, reports: Reports) {
        self.core = core
        self.reports = reports
    }

    public var name: String { core.name }
    public var format: AudioFormat { core.format }
    public var isAvailable: Bool { core.isAvailable }
    public var lastError: AudioOutputError? { core.lastError }
    public func whenUnavailable(_ handler: @escaping @Sendable () -> Void) { core.whenUnavailable(handler) }
    public func write(_ chunk: PCMChunk) async throws { try await core.write(chunk) }
    public func drain() async throws { try await core.drain() }
    public func flush() async throws { try await core.flush() }
    public func reopen() async throws { try await core.reopen() }
    public func close() async { await core.close() }

    public var framesTaken: Int? { reports.contains(.position) ? core.framesTaken : nil }
    public var heardAfterFlush: Duration? { reports.contains(.position) ? core.heardAfterFlush : nil }
    public var playedOutAt: ContinuousClock.Instant? { reports.contains(.position) ? core.playedOutAt : nil }
    public var framesToStart: Int { reports.contains(.startThreshold) ? core.framesToStart : 0 }

    public func flushCountingUnplayed() async throws -> FlushPosition? {
        guard reports.contains(.position) else {
            try await flush()
            return nil
        }
        return try await core.flushCountingUnplayed()
    }
}
