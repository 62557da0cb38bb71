import CPulseSimple
import Foundation
import Logging
import SpeechModel
import SpeechRendering
import Synchronization

/// Plays through a PulseAudio server, or PipeWire through `pipewire-pulse`, with the simple API.
///
/// The stream asks for a small target latency (`AudioSinkOptions.targetLatency`), so a flush
/// silences within about that much. The stream stays open between announcements (idle hardware
/// swallows the first syllable of a fresh stream); when the server goes away the next write
/// connects again.
public final class PulseAudioSink: ReopenableAudioSink {
    public let format: AudioFormat
    /// The server string (`unix:/run/user/1000/pulse/native`); nil uses libpulse's own lookup
    /// (`PULSE_SERVER`, client.conf, the session's socket).
    public let server: String?
    private let core: DeviceSink
    private let releaseAfterIdle: Duration?
    /// Closes the idle stream after `releaseAfterIdle`; a write cancels it first.
    private let release = Mutex<Task<Void, Never>?>(nil)

    public var name: String { core.name }

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
        self.format = format
        self.server = server
        self.releaseAfterIdle = options.releaseAfterIdle
        let name = device.map { "pulse:\($0)" } ?? "pulse"
        self.core = DeviceSink(name: name, format: format, options: options, logger: logger) {
            () throws(AudioOutputError) in
            try PulseAudioDevice(
                sinkName: name, server: server, device: device, streamName: streamName,
                format: format, options: options)
        }
    }

    public var isAvailable: Bool { core.isAvailable }
    public var lastError: AudioOutputError? { core.lastError }
    public func write(_ chunk: PCMChunk) async throws {
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

    public func drain() async throws {
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

    public func flush() async throws {
        defer { scheduleRelease() }
        try await core.flush()
    }
    public var framesTaken: Int? { core.framesTaken }
    public var heardAfterFlush: Duration? { core.heardAfterFlush }
    /// A pause's flush: the stream is kept for the resume, which then continues on it rather
    /// than on a fresh stream whose start the server may cut; a cancel while paused releases it.
    public func flushCountingUnplayed() async throws -> FlushPosition? {
        try await core.flushCountingUnplayed()
    }
    public func reopen() async throws {
        // Opened to probe the server: released again unless an announcement follows.
        try await core.reopen()
        scheduleRelease()
    }
    public func close() async { await core.close() }
    public var playedOutAt: ContinuousClock.Instant? { core.playedOutAt }
}

/// One `pa_simple` playback stream.
final class PulseAudioDevice: BlockingAudioDevice {
    private let stream: OpaquePointer
    private let sinkName: String
    /// How often drain and the wait for room look at the stream's latency.
    private let pollMicroseconds: UInt64
    /// Audio queued ahead of playback that a write waits to fall below.
    private let targetLatencyMicroseconds: UInt64
    private let bytesPerSecond: UInt64

    init(
        sinkName: String, server: String?, device: String?, streamName: String,
        format: AudioFormat, options: AudioSinkOptions
    ) throws(AudioOutputError) {
        self.sinkName = sinkName
        guard format.channels >= 1, format.channels <= Int(PA_CHANNELS_MAX), format.sampleRate > 0 else {
            throw .unsupportedFormat(sink: sinkName, "PulseAudio cannot play \(format)")
        }
        var spec = pa_sample_spec(
            format: PA_SAMPLE_S16LE, rate: UInt32(format.sampleRate), channels: UInt8(format.channels))
        let piece = UInt32(format.byteCount(for: .milliseconds(10)))
        // Small tlength keeps little audio queued in the server, so a flush is heard at once;
        // a prebuf of one piece starts playback as soon as the first piece arrives.
        var attributes = pa_buffer_attr(
            maxlength: UInt32.max,
            tlength: UInt32(max(format.byteCount(for: options.targetLatency), Int(2 * piece))),
            prebuf: piece,
            minreq: UInt32.max,
            fragsize: UInt32.max)
        var error: Int32 = 0
        guard
            let stream = pa_simple_new(
                server, options.applicationName, PA_STREAM_PLAYBACK, device, streamName,
                &spec, nil, &attributes, &error)
        else {
            let place = server.map { " (server \($0))" } ?? ""
            throw .openFailed(sink: sinkName, Self.message(error) + place)
        }
        self.stream = stream
        self.pollMicroseconds = 2_000
        self.targetLatencyMicroseconds = UInt64(max(options.targetLatency.microseconds, 20_000))
        self.bytesPerSecond = UInt64(format.sampleRate * format.bytesPerFrame)
    }

    func waitForRoom(_ count: Int, until interrupted: () -> Bool) throws(AudioOutputError) {
        // pa_simple_write blocks until the server asks for more, which it does in minreq steps;
        // a flush queued behind it would wait that long. Waiting here in short polls instead
        // lets an interrupt through within one poll.
        let needed = UInt64(count) * 1_000_000 / bytesPerSecond
        var previous = UInt64.max
        var unchanged = 0
        while !interrupted() {
            var error: Int32 = 0
            let latency = pa_simple_get_latency(stream, &error)
            if latency == UInt64.max { throw .writeFailed(sink: sinkName, Self.message(error)) }
            if latency + needed <= targetLatencyMicroseconds { return }
            // A latency that does not move at all is the client's stale view of a stream that
            // stopped for an underrun (seen after the server was stopped and continued): writing
            // is what restarts it and refreshes the timing. Bounded by the call's time limit.
            unchanged = latency == previous ? unchanged + 1 : 0
            if unchanged >= 25 { return }
            previous = latency
            usleep(UInt32(min(latency + needed - targetLatencyMicroseconds, pollMicroseconds)))
        }
    }

    /// The stream's latency: what was written and not yet played, plus the server's and the
    /// device's own buffering, so the time until the last sample written is heard.
    func queuedDuration() -> Duration? {
        var error: Int32 = 0
        let latency = pa_simple_get_latency(stream, &error)
        return latency == UInt64.max ? nil : .microseconds(Int64(latency))
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var error: Int32 = 0
        if pa_simple_write(stream, base, bytes.count, &error) < 0 {
            throw .writeFailed(sink: sinkName, Self.message(error))
        }
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        // pa_simple_drain cannot be interrupted, so wait out most of the buffer in short steps
        // and leave it only the last few milliseconds.
        var previous = UInt64.max
        var unchanged = 0
        while !interrupted() {
            var error: Int32 = 0
            let latency = pa_simple_get_latency(stream, &error)
            if latency == UInt64.max { throw .drainFailed(sink: sinkName, Self.message(error)) }
            if latency <= pollMicroseconds && latency < previous {
                // Playing and nearly done: wait out the rest by the server's clock. Waiting for
                // pa_simple_drain's answer adds up to one sink block on top.
                usleep(UInt32(latency))
                return
            }
            // Not moving: playback has not started (less than prebuf queued); drain starts it.
            unchanged = latency >= previous ? unchanged + 1 : 0
            if unchanged >= 3 { break }
            previous = latency
            usleep(UInt32(min(latency / 2, pollMicroseconds)))
        }
        if interrupted() { return }
        var error: Int32 = 0
        if pa_simple_drain(stream, &error) < 0 {
            throw .drainFailed(sink: sinkName, Self.message(error))
        }
    }

    func flush() throws(AudioOutputError) {
        var error: Int32 = 0
        if pa_simple_flush(stream, &error) < 0 {
            throw .flushFailed(sink: sinkName, Self.message(error))
        }
    }

    func unplayedBytes() -> Int? {
        // The stream's buffer plus the sink's own latency: what has not reached the speaker. A
        // flush rewinds the sink too, as far as the sink can: read again after one, this is
        // what it kept (on a null sink, about its last block).
        var error: Int32 = 0
        let latency = pa_simple_get_latency(stream, &error)
        guard latency != UInt64.max else { return nil }
        return Int(latency * bytesPerSecond / 1_000_000)
    }

    func close() {
        pa_simple_free(stream)
    }

    private static func message(_ code: Int32) -> String {
        pa_strerror(code).map { String(cString: $0) } ?? "PulseAudio error \(code)"
    }
}
