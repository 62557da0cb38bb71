import CPulseAudio
import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Plays through a PulseAudio server, or PipeWire through `pipewire-pulse`.
///
/// The stream asks for a small target latency (`AudioSinkOptions.targetLatency`), so a flush
/// silences within about that much. The stream stays open between announcements (idle hardware
/// swallows the first syllable of a fresh stream); when the server goes away the next write
/// connects again. A stream on a named sink stays on it: when that sink goes away the stream
/// fails rather than moving to the server's default sink (`PulseAudioDevice`).
public final class PulseAudioSink: DeviceBackedSink {
    /// The server string (`unix:/run/user/1000/pulse/native`); nil uses libpulse's own lookup
    /// (`PULSE_SERVER`, client.conf, the session's socket).
    public let server: String?
    private let releaseAfterIdle: Duration?
    /// Closes the idle stream after `releaseAfterIdle`; a write cancels it first.
    private let release = Mutex<Task<Void, Never>?>(nil)

    /// - Parameters:
    ///   - format: the sample format of every chunk written.
    ///   - server: the server to connect to; nil for libpulse's default lookup.
    ///   - device: the server's sink to play on; nil for its default sink.
    ///   - streamName: the stream name the server shows.
    ///   - options: latency and time limits.
    ///   - logger: where failures and recoveries are reported.
    public init(
        format: AudioFormat, server: String? = nil, device: String? = nil,
        streamName: String = "announcements", options: AudioSinkOptions = AudioSinkOptions(),
        logger: Logger = Logger(label: "speakd.audio")
    ) {
        self.server = server
        self.releaseAfterIdle = options.releaseAfterIdle
        let name = device.map { "pulse:\($0)" } ?? "pulse"
        let core = DeviceSink(name: name, format: format, options: options, logger: logger) {
            () throws(AudioOutputError) in
            try PulseAudioDevice(
                sinkName: name, server: server, device: device, streamName: streamName,
                format: format, options: options)
        }
        // A pause's flush (the counting one) keeps the stream for the resume, which then continues
        // on it rather than on a fresh stream whose start the server may cut; a cancel while
        // paused releases it.
        super.init(core: core, reports: [.position, .startThreshold])
    }

    override public func write(_ chunk: PCMChunk) async throws {
        // A pending release is called off; one already closing is waited for, so the write opens afresh.
        if let pending = release.withLock({ task -> Task<Void, Never>? in
            defer { task = nil }
            return task
        }) {
            pending.cancel()
            await pending.value
        }
        try await core.write(chunk)
    }

    override public func drain() async throws {
        try await core.drain()
        scheduleRelease()
    }

    /// Closes the stream after `releaseAfterIdle` unless a write comes first.
    private func scheduleRelease() {
        guard let idle = releaseAfterIdle else { return }
        let core = core
        let task = Task {
            guard (try? await Task.sleep(for: idle)) != nil else { return }
            await core.close()
        }
        release.withLock {
            $0?.cancel(); $0 = task
        }
    }

    override public func flush() async throws {
        defer { scheduleRelease() }
        try await core.flush()
    }

    override public func reopen() async throws {
        // Opened to probe the server: released again unless an announcement follows.
        try await core.reopen()
        scheduleRelease()
    }
}
