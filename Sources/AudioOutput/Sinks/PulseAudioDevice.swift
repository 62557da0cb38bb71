import CPulseAudio
import FoundationEssentials
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// One PulseAudio playback stream, driven through libpulse's threaded main loop.
///
/// It does what `pa_simple` does (which it replaced) with one difference that the simple API
/// cannot express: a stream on a named sink is connected with `PA_STREAM_DONT_MOVE`. When a sink
/// goes away (a USB or Bluetooth headset unplugged, its module unloaded) the server moves the
/// streams on it to its default sink, so a customer's headset announcement would go on in the
/// hall; with the flag the server ends the stream instead, the write fails, and the announcement
/// finishes `failed`. A stream on the server's default sink (no sink named) may still follow it.
///
/// Every call blocks the device thread that owns this stream, holding the main loop's lock while
/// it looks at the stream and waiting on it (which releases the lock) for the loop's callbacks.
final class PulseAudioDevice: BlockingAudioDevice {
    private let mainloop: OpaquePointer
    private let context: OpaquePointer
    private var stream: OpaquePointer?
    private let signal: Signal
    private let sinkName: String
    /// How often drain and the wait for room look at the stream's latency.
    private let pollMicroseconds: UInt64
    /// Audio queued ahead of playback that a write waits to fall below.
    private let targetLatencyMicroseconds: UInt64
    private let bytesPerSecond: UInt64
    private var closed = false

    /// Bytes written since the stream last stopped (opened, flushed or run dry): at `prebuf`
    /// of them the server starts it.
    private var writtenWhileStopped = 0
    /// A write brought the stopped stream to `prebuf` since the last estimate: the next one waits
    /// for the server to start it, once per stop, so a server that never says so costs one wait.
    private var awaitingStart = false
    private let prebufBytes: Int
    /// How long a write waits for the server to say the stream started before going on with
    /// the estimate it has.
    private static let startWaitLimit = Duration.milliseconds(50)

    /// What the main loop's callbacks reach: the loop to wake, an operation's outcome, and
    /// whether the server is playing the stream (it says when it starts and when it runs dry).
    private final class Signal {
        let mainloop: OpaquePointer
        var success: Int32 = 0
        var playing = false
        init(mainloop: OpaquePointer) { self.mainloop = mainloop }
    }

    init(
        sinkName: String, server: String?, device: String?, streamName: String,
        format: AudioFormat, options: AudioSinkOptions
    ) throws(AudioOutputError) {
        self.sinkName = sinkName
        guard format.channels >= 1, format.channels <= Int(PA_CHANNELS_MAX), format.sampleRate > 0 else {
            throw .unsupportedFormat(sink: sinkName, "PulseAudio cannot play \(format)")
        }
        guard let mainloop = pa_threaded_mainloop_new() else {
            throw .openFailed(sink: sinkName, "libpulse cannot make a main loop")
        }
        guard let context = pa_context_new(pa_threaded_mainloop_get_api(mainloop), options.applicationName) else {
            pa_threaded_mainloop_free(mainloop)
            throw .openFailed(sink: sinkName, "libpulse cannot make a context")
        }
        self.mainloop = mainloop
        self.context = context
        self.signal = Signal(mainloop: mainloop)
        self.pollMicroseconds = 2_000
        self.targetLatencyMicroseconds = UInt64(max(options.targetLatency.microseconds, 20_000))
        self.bytesPerSecond = UInt64(format.sampleRate * format.bytesPerFrame)
        self.prebufBytes = format.byteCount(for: .milliseconds(10))
        do throws(AudioOutputError) {
            try connect(server: server, device: device, streamName: streamName, format: format, options: options)
        } catch {
            close()
            throw error
        }
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(signal).toOpaque() }

    private func connect(
        server: String?, device: String?, streamName: String, format: AudioFormat, options: AudioSinkOptions
    ) throws(AudioOutputError) {
        let place = server.map { " (server \($0))" } ?? ""
        pa_context_set_state_callback(context, { _, userdata in PulseAudioDevice.wake(userdata) }, userdata)
        guard pa_context_connect(context, server, PA_CONTEXT_NOFLAGS, nil) >= 0 else {
            throw .openFailed(sink: sinkName, contextMessage() + place)
        }
        guard pa_threaded_mainloop_start(mainloop) >= 0 else {
            throw .openFailed(sink: sinkName, "libpulse cannot start its main loop")
        }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        try waitFor(PA_CONTEXT_READY, failed: PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED, place: place) {
            pa_context_get_state(context)
        }

        var spec = pa_sample_spec(
            format: PA_SAMPLE_S16LE, rate: UInt32(format.sampleRate), channels: UInt8(format.channels))
        // The role goes on this stream only (not the context, as `PULSE_PROP_media.role` would put
        // it on every context the process makes).
        let properties = pa_proplist_new()
        defer { pa_proplist_free(properties) }
        if let role = options.mediaRole { pa_proplist_sets(properties, PA_PROP_MEDIA_ROLE, role) }
        guard let stream = pa_stream_new_with_proplist(context, streamName, &spec, nil, properties) else {
            throw .openFailed(sink: sinkName, contextMessage())
        }
        self.stream = stream
        pa_stream_set_state_callback(stream, { _, userdata in PulseAudioDevice.wake(userdata) }, userdata)
        pa_stream_set_write_callback(stream, { _, _, userdata in PulseAudioDevice.wake(userdata) }, userdata)
        pa_stream_set_latency_update_callback(stream, { _, userdata in PulseAudioDevice.wake(userdata) }, userdata)
        pa_stream_set_started_callback(
            stream, { _, userdata in PulseAudioDevice.note(playing: true, userdata) }, userdata)
        pa_stream_set_underflow_callback(
            stream, { _, userdata in PulseAudioDevice.note(playing: false, userdata) }, userdata)

        let piece = UInt32(prebufBytes)
        // Small tlength keeps little audio queued in the server, so a flush is heard at once;
        // a prebuf of one piece starts playback as soon as the first piece arrives.
        var attributes = pa_buffer_attr(
            maxlength: UInt32.max,
            tlength: UInt32(max(format.byteCount(for: options.targetLatency), Int(2 * piece))),
            prebuf: piece,
            minreq: UInt32.max,
            fragsize: UInt32.max)
        // The timing flags are pa_simple's: the latency is interpolated between the server's updates.
        var flags =
            PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
            | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
        if device != nil { flags |= PA_STREAM_DONT_MOVE.rawValue }
        guard pa_stream_connect_playback(stream, device, &attributes, pa_stream_flags_t(flags), nil, nil) >= 0 else {
            throw .openFailed(sink: sinkName, contextMessage() + place)
        }
        try waitFor(PA_STREAM_READY, failed: PA_STREAM_FAILED, PA_STREAM_TERMINATED, place: place) {
            pa_stream_get_state(stream)
        }
    }

    /// Waits on the main loop, whose lock is held, until `state()` is `ready`; either of the
    /// `failed` states throws the context's error.
    private func waitFor<State: Equatable>(
        _ ready: State, failed: State, _ terminated: State, place: String, state: () -> State
    ) throws(AudioOutputError) {
        while true {
            let now = state()
            if now == ready { return }
            if now == failed || now == terminated {
                throw .openFailed(sink: sinkName, contextMessage() + place)
            }
            pa_threaded_mainloop_wait(mainloop)
        }
    }

    /// The server started playing the stream, or it ran dry (and waits for `prebuf` again).
    private static func note(playing: Bool, _ userdata: UnsafeMutableRawPointer?) {
        guard let userdata else { return }
        let signal = Unmanaged<Signal>.fromOpaque(userdata).takeUnretainedValue()
        signal.playing = playing
        pa_threaded_mainloop_signal(signal.mainloop, 0)
    }

    private static func wake(_ userdata: UnsafeMutableRawPointer?) {
        guard let userdata else { return }
        pa_threaded_mainloop_signal(Unmanaged<Signal>.fromOpaque(userdata).takeUnretainedValue().mainloop, 0)
    }

    /// Why the stream cannot be used, or nil while it can; called with the lock held.
    private func deadMessage() -> String? {
        guard let stream, pa_context_get_state(context) == PA_CONTEXT_READY,
            pa_stream_get_state(stream) == PA_STREAM_READY
        else { return contextMessage() }
        return nil
    }

    /// The context's last error, said so that an ended stream names its likely cause.
    private func contextMessage() -> String {
        let code = pa_context_errno(context)
        let message = Self.message(code)
        if code == Int32(PA_ERR_KILLED.rawValue) {
            return "\(message): the server ended the stream (its sink was removed or the stream killed)"
        }
        return message
    }

    func waitForRoom(_ count: Int, until interrupted: () -> Bool) throws(AudioOutputError) {
        // A write blocks until the server asks for more, which it does in minreq steps; a flush
        // queued behind it would wait that long. Waiting here in short polls instead lets an
        // interrupt through within one poll.
        // A stream short of its prebuffer plays nothing until more comes, so waiting makes no
        // room; and the sink's own buffer, which the latency counts, is taken back when it starts.
        if bytesToStart > 0 { return }
        let needed = UInt64(count) * 1_000_000 / bytesPerSecond
        var previous = UInt64.max
        var unchanged = 0
        while !interrupted() {
            let latency = try latencyMicroseconds { .writeFailed(sink: sinkName, $0) }
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

    var bytesToStart: Int {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return signal.playing ? 0 : max(0, prebufBytes - writtenWhileStopped)
    }

    /// The stream's latency: what was written and not yet played, plus the server's and the
    /// device's own buffering, so the time until the last sample written is heard.
    func queuedDuration() -> Duration? {
        if awaitingStart { awaitStart() }
        if let latency = reportedLatency() { return .microseconds(latency) }
        guard let latency = try? latencyMicroseconds({ .writeFailed(sink: sinkName, $0) }) else { return nil }
        return .microseconds(Int64(latency))
    }

    /// The stream's latency in microseconds (0 while it is negative), waiting for the server's
    /// first timing update if there is none yet.
    private func latencyMicroseconds(
        _ failure: (String) -> AudioOutputError
    ) throws(AudioOutputError) -> UInt64 {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        while true {
            if let dead = deadMessage() { throw failure(dead) }
            var latency: pa_usec_t = 0
            var negative: Int32 = 0
            if pa_stream_get_latency(stream, &latency, &negative) >= 0 {
                return (negative != 0 ? 0 : latency) + unplayedSinkLatency()
            }
            guard pa_context_errno(context) == Int32(PA_ERR_NODATA.rawValue) else { throw failure(contextMessage()) }
            pa_threaded_mainloop_wait(mainloop)
        }
    }

    /// The part of the sink's own latency that `pa_stream_get_latency` leaves out at a stream's
    /// start, in microseconds (call with the main loop locked). libpulse takes the sample being
    /// played as the stream's read index less the sink's latency, and stops at zero: while the
    /// sink has taken less of the stream than it holds in its own buffer (a stream that has not
    /// started, or has just started), the rest of that buffer, which plays before the stream's
    /// first sample, is not counted, and a null sink holds up to about 20 ms. It counts here for
    /// the wait for room, the drain and a flush's count; events are dated by `reportedLatency`,
    /// whose sum has no such clamp.
    private func unplayedSinkLatency() -> UInt64 {
        guard let info = pa_stream_get_timing_info(stream), info.pointee.read_index_corrupt == 0,
            let spec = pa_stream_get_sample_spec(stream)
        else { return 0 }
        let read = pa_bytes_to_usec(UInt64(max(0, info.pointee.read_index)), spec) + info.pointee.transport_usec
        return info.pointee.sink_usec > read ? info.pointee.sink_usec - read : 0
    }

    /// Waits (boundedly) for the server to say it started a stream that has reached `prebuf`,
    /// then for a fresh timing report. Until it starts, the last report is of a stream that was
    /// not playing, taken when the sink's own latency was another; dated from it, a Piper
    /// voice's first sound, 10 ms into its stream, was heard up to 16 ms after its `started`.
    private func awaitStart() {
        awaitingStart = false
        let deadline = ContinuousClock.now + Self.startWaitLimit
        while true {
            pa_threaded_mainloop_lock(mainloop)
            let playing = signal.playing
            let dead = deadMessage() != nil
            pa_threaded_mainloop_unlock(mainloop)
            if dead || ContinuousClock.now >= deadline { return }
            if playing { break }
            usleep(500)
        }
        try? run({ stream, callback, userdata in pa_stream_update_timing_info(stream, callback, userdata) }) {
            .writeFailed(sink: sinkName, $0)
        }
    }

    /// The latency as the server's last timing report gives it, aged to now, in microseconds:
    /// libpulse's own estimate without its interpolation. That runs the report through a
    /// smoother which, with the few reports it has just after a stream starts, placed the
    /// stream's first samples up to 9 ms before they were heard (early `started` events for a
    /// Piper voice, whose sound then began 10 ms into its stream, and for speech without a lead-in).
    private func reportedLatency() -> Int64? {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        guard let info = pa_stream_get_timing_info(stream)?.pointee, info.read_index_corrupt == 0,
            info.write_index_corrupt == 0, let spec = pa_stream_get_sample_spec(stream)
        else { return nil }
        let buffered = Int64(pa_bytes_to_usec(UInt64(max(0, info.write_index - info.read_index)), spec))
        var latency = buffered + Int64(info.sink_usec) + Int64(info.transport_usec)
        if info.playing != 0 {
            var now = timeval()
            gettimeofday(&now, nil)
            let reported = info.timestamp
            latency -=
                (Int64(now.tv_sec) - Int64(reported.tv_sec)) * 1_000_000
                + Int64(now.tv_usec) - Int64(reported.tv_usec)
        }
        return max(0, latency)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        guard var data = bytes.baseAddress, !bytes.isEmpty else { return }
        var length = bytes.count
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        if signal.playing {
            writtenWhileStopped = 0
        } else {
            // Only the write that reaches `prebuf`: what follows it until the start waits no more.
            if writtenWhileStopped < prebufBytes && writtenWhileStopped + length >= prebufBytes {
                awaitingStart = true
            }
            writtenWhileStopped += length
        }
        while length > 0 {
            var room = 0
            while true {
                if let dead = deadMessage() { throw .writeFailed(sink: sinkName, dead) }
                room = pa_stream_writable_size(stream)
                if room == -1 { throw .writeFailed(sink: sinkName, contextMessage()) }
                if room > 0 { break }
                pa_threaded_mainloop_wait(mainloop)
            }
            let count = min(room, length)
            guard pa_stream_write(stream, data, count, nil, 0, PA_SEEK_RELATIVE) >= 0 else {
                throw .writeFailed(sink: sinkName, contextMessage())
            }
            data += count
            length -= count
        }
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        // A drain operation cannot be interrupted, so wait out most of the buffer in short steps
        // and leave it only the last few milliseconds.
        var previous = UInt64.max
        var unchanged = 0
        while !interrupted() {
            let latency = try latencyMicroseconds { .drainFailed(sink: sinkName, $0) }
            if latency <= pollMicroseconds && latency < previous {
                // Playing and nearly done: wait out the rest by the server's clock. Waiting for
                // the drain's answer adds up to one sink block on top.
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
        try run({ stream, callback, userdata in pa_stream_drain(stream, callback, userdata) }) {
            .drainFailed(sink: sinkName, $0)
        }
    }

    func flush() throws(AudioOutputError) {
        try run({ stream, callback, userdata in pa_stream_flush(stream, callback, userdata) }) {
            .flushFailed(sink: sinkName, $0)
        }
        // The server waits for `prebuf` again before it plays what comes next.
        pa_threaded_mainloop_lock(mainloop)
        signal.playing = false
        writtenWhileStopped = 0
        awaitingStart = false
        pa_threaded_mainloop_unlock(mainloop)
    }

    /// Starts a stream operation and waits for its answer, as `pa_simple_drain` and
    /// `pa_simple_flush` do.
    private func run(
        _ start: (OpaquePointer?, pa_stream_success_cb_t, UnsafeMutableRawPointer) -> OpaquePointer?,
        _ failure: (String) -> AudioOutputError
    ) throws(AudioOutputError) {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        if let dead = deadMessage() { throw failure(dead) }
        signal.success = 0
        let callback: pa_stream_success_cb_t = { _, success, userdata in
            guard let userdata else { return }
            let signal = Unmanaged<Signal>.fromOpaque(userdata).takeUnretainedValue()
            signal.success = success
            pa_threaded_mainloop_signal(signal.mainloop, 0)
        }
        guard let operation = start(stream, callback, userdata) else { throw failure(contextMessage()) }
        defer { pa_operation_unref(operation) }
        while pa_operation_get_state(operation) == PA_OPERATION_RUNNING {
            pa_threaded_mainloop_wait(mainloop)
            if let dead = deadMessage() {
                pa_operation_cancel(operation)
                throw failure(dead)
            }
        }
        guard signal.success != 0 else { throw failure(contextMessage()) }
    }

    func unplayedBytes() -> Int? {
        // The stream's buffer plus the sink's own latency: what has not reached the speaker. A
        // flush rewinds the sink too, as far as the sink can: read again after one, this is
        // what it kept (on a null sink, about its last block).
        guard let latency = try? latencyMicroseconds({ .writeFailed(sink: sinkName, $0) }) else { return nil }
        return Int(latency * bytesPerSecond / 1_000_000)
    }

    func close() {
        guard !closed else { return }
        closed = true
        // In pa_simple_free's order: no callback runs once the loop has stopped.
        pa_threaded_mainloop_stop(mainloop)
        if let stream {
            pa_stream_set_state_callback(stream, nil, nil)
            pa_stream_set_write_callback(stream, nil, nil)
            pa_stream_set_latency_update_callback(stream, nil, nil)
            pa_stream_set_started_callback(stream, nil, nil)
            pa_stream_set_underflow_callback(stream, nil, nil)
            pa_stream_unref(stream)
            self.stream = nil
        }
        pa_context_set_state_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_free(mainloop)
    }

    private static func message(_ code: Int32) -> String {
        pa_strerror(code).map { String(cString: $0) } ?? "PulseAudio error \(code)"
    }
}
