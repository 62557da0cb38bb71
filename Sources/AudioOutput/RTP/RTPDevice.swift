import CSamplerate
import Logging
import PosixSupport
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What an RTP output keeps across reopening its device, so a receiver sees one source:
/// sequence numbers and the timestamp go on where they were.
final class RTPSession: Sendable {
    struct Counters {
        var sequence = UInt16.random(in: 0...UInt16.max)
        var timestamp = UInt32.random(in: 0...UInt32.max)
        var packets: UInt32 = 0
        var octets: UInt32 = 0
        /// The monotonic time the last packet was due, to advance the timestamp over a pause.
        var lastDeadline: UInt64?
    }

    let stream: RTPStream
    let outputName: String
    let ssrc: UInt32
    let counters = Mutex(Counters())
    /// What the output has sent, for the daemon's health and metrics.
    let statistics: RTPStatistics
    /// Whether the log has said that the pacing thread runs at normal priority: once per output.
    let pacingPriorityNoted = Mutex(false)

    init(stream: RTPStream, outputName: String, statistics: RTPStatistics = RTPStatistics()) {
        self.stream = stream
        self.outputName = outputName
        self.ssrc = stream.ssrc(forOutput: outputName)
        self.statistics = statistics
    }
}

/// An RTP stream as a blocking audio device: writes are resampled to the codec's rate, encoded
/// and queued; a pacing thread of its own sends one packet every `ptime` from absolute deadlines
/// on the monotonic clock, so the stream never drifts, and sends nothing while nothing plays.
///
/// A stream starts with the first packet after silence (marker bit set) and ends once nothing
/// has been queued for `idleEnd` or when flushed: then an RTCP BYE (and a SAP deletion) goes out.
final class RTPDevice: BlockingAudioDevice, @unchecked Sendable {
    // @unchecked Sendable: the pacing thread and the sink's device thread share it; every mutable
    // field is read and written under `lock`, except the resampler, which only the device thread
    // touches (write, drain, flush).
    private let session: RTPSession
    private let stream: RTPStream
    private let format: AudioFormat
    private let sender: UDPSender
    private let control: UDPSender
    private let announcer: UDPSender?
    private let logger: Logger
    private let resampler: OpaquePointer?
    private let lock = ConditionLock()
    /// How much encoded audio may wait in the queue (at least two packets).
    private let bufferNanoseconds: UInt64
    private let ptimeNanoseconds: UInt64
    private let packetBytes: Int
    private let cname: String
    private let sapOrigin: [UInt8]
    private let sdp: String

    // Guarded by `lock`.
    private var queue: [UInt8] = []
    private var head = 0
    private var draining = false
    private var endNow = false
    private var stopping = false
    private var streaming = false
    private var nextDeadline: UInt64 = 0
    private var underrun = false
    private var failure: AudioOutputError?
    private var lastReport: UInt64 = 0
    private var lastAnnouncement: UInt64 = 0
    private var threadExited = false

    /// How long the queue may stay empty before the stream counts as ended.
    static let idleEnd: UInt64 = 300_000_000
    /// Sender reports while a stream plays (RFC 3550 allows 5 s as the minimum interval).
    static let reportInterval: UInt64 = 5_000_000_000
    /// SAP announcements while a stream plays.
    static let announceInterval: UInt64 = 3_000_000_000

    init(session: RTPSession, format: AudioFormat, buffer: Duration, logger: Logger) throws(AudioOutputError) {
        self.session = session
        let stream = session.stream
        self.stream = stream
        self.format = format
        self.logger = logger
        let name = "rtp:\(stream.host)"
        do throws(UDPSenderError) {
            sender = try UDPSender(
                address: stream.addressBytes, port: stream.port, hops: stream.ttl, dscp: stream.dscp,
                interface: stream.interface)
            control = try UDPSender(
                address: stream.addressBytes, port: stream.port + 1, hops: stream.ttl, dscp: stream.dscp,
                interface: stream.interface)
            announcer = try stream.sapGroup.flatMap(RTPStream.numericAddress).map { group throws(UDPSenderError) in
                try UDPSender(address: group, port: 9875, hops: stream.ttl, dscp: 0, interface: stream.interface)
            }
        } catch {
            throw .openFailed(sink: name, error.message)
        }
        var status: Int32 = 0
        resampler =
            format.sampleRate == stream.codec.clockRate ? nil : src_new(Int32(SRC_SINC_FASTEST), 1, &status)
        if format.sampleRate != stream.codec.clockRate && resampler == nil {
            throw .openFailed(sink: name, "libsamplerate: \(String(cString: src_strerror(status)))")
        }
        ptimeNanoseconds = UInt64(stream.ptimeMilliseconds) * 1_000_000
        bufferNanoseconds = max(UInt64(buffer.microseconds) * 1000, 2 * ptimeNanoseconds)
        packetBytes = stream.samplesPerPacket * stream.codec.bytesPerSample
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        cname =
            "speakd-\(session.outputName)@"
            + String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        sapOrigin =
            UDPSender.sourceAddress(towards: stream.addressBytes, port: stream.port)
            ?? [UInt8](repeating: 0, count: stream.addressBytes.count)
        sdp = stream.sdp(outputName: session.outputName, origin: UDPSender.text(sapOrigin))
        DetachedThread.start(name: "speakd-rtp") { [self] in pace() }
    }

    deinit {
        if let resampler { src_delete(resampler) }
    }

    // MARK: BlockingAudioDevice (the sink's device thread)

    func waitForRoom(_ count: Int, until interrupted: () -> Bool) throws(AudioOutputError) {
        lock.lock()
        defer { lock.unlock() }
        while !interrupted() && failure == nil && queuedNanoseconds() >= bufferNanoseconds {
            _ = lock.wait(until: ConditionLock.deadline(in: .nanoseconds(Int64(ptimeNanoseconds / 2))))
        }
        if let failure { throw failure }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        let samples = bytes.bindMemory(to: Int16.self)
        let channels = format.channels
        let frames = samples.count / channels
        var mono = [Float](repeating: 0, count: frames)
        for frame in 0..<frames {
            var sum = 0
            for channel in 0..<channels { sum += Int(Int16(littleEndian: samples[frame * channels + channel])) }
            mono[frame] = Float(sum) / Float(channels) / 32768
        }
        let encoded = encode(resample(mono, endOfInput: false))
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        draining = false
        queue.append(contentsOf: encoded)
        lock.broadcast()
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        let tail = encode(resample([], endOfInput: true))
        lock.lock()
        defer { lock.unlock() }
        queue.append(contentsOf: tail)
        draining = true
        lock.broadcast()
        while !interrupted() && failure == nil && queue.count > head {
            _ = lock.wait(until: ConditionLock.deadline(in: .milliseconds(5)))
        }
        if let failure { throw failure }
        // What left last is heard a packet and the receiver's delay later.
        guard !interrupted() else { return }
        let heard =
            Self.now() + (streaming ? ptimeNanoseconds : 0) + UInt64(stream.receiverDelayMilliseconds) * 1_000_000
        while !interrupted() && Self.now() < heard {
            _ = lock.wait(until: ConditionLock.deadline(in: .milliseconds(5)))
        }
    }

    func flush() throws(AudioOutputError) {
        if let resampler { src_reset(resampler) }
        lock.lock()
        defer { lock.unlock() }
        queue.removeAll(keepingCapacity: true)
        head = 0
        draining = false
        if streaming { endNow = true }
        lock.broadcast()
    }

    func unplayedBytes() -> Int? {
        lock.lock()
        defer { lock.unlock() }
        let samples = (queue.count - head) / stream.codec.bytesPerSample
        return samples * format.sampleRate / stream.codec.clockRate * format.bytesPerFrame
    }

    func queuedDuration() -> Duration? {
        lock.lock()
        defer { lock.unlock() }
        let now = Self.now()
        let start = streaming ? max(nextDeadline, now) : now
        let heard = start + queuedNanoseconds() + UInt64(stream.receiverDelayMilliseconds) * 1_000_000
        return .nanoseconds(Int64(heard - now))
    }

    func close() {
        lock.lock()
        stopping = true
        lock.broadcast()
        // The pacing thread ends the stream (BYE) and exits; it needs the lock to do so.
        let limit = Self.now() + 200_000_000
        while !threadExited && Self.now() < limit {
            _ = lock.wait(until: ConditionLock.deadline(in: .milliseconds(10)))
        }
        lock.unlock()
    }

    // MARK: Encoding

    /// `samples` (mono, −1…1, at the renderer's rate) at the codec's rate.
    private func resample(_ samples: [Float], endOfInput: Bool) -> [Float] {
        guard let resampler else { return samples }
        let ratio = Double(stream.codec.clockRate) / Double(format.sampleRate)
        var output = [Float](repeating: 0, count: Int(Double(samples.count) * ratio) + 256)
        var produced = 0
        var consumed = 0
        while true {
            var data = SRC_DATA()
            let used: Int = samples.withUnsafeBufferPointer { input in
                output.withUnsafeMutableBufferPointer { out in
                    data.data_in = input.baseAddress.map { $0 + consumed }
                    data.input_frames = Int(samples.count - consumed)
                    data.data_out = out.baseAddress! + produced
                    data.output_frames = Int(out.count - produced)
                    data.end_of_input = endOfInput ? 1 : 0
                    data.src_ratio = ratio
                    guard src_process(resampler, &data) == 0 else { return -1 }
                    return Int(data.input_frames_used)
                }
            }
            guard used >= 0 else { break }
            consumed += used
            produced += Int(data.output_frames_gen)
            if consumed >= samples.count && data.output_frames_gen == 0 { break }
            if produced == output.count { output.append(contentsOf: [Float](repeating: 0, count: 256)) }
        }
        if endOfInput { src_reset(resampler) }
        return Array(output[..<produced])
    }

    /// Samples as the codec sends them.
    private func encode(_ samples: [Float]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(samples.count * stream.codec.bytesPerSample)
        for sample in samples {
            let linear = Int16(clamping: Int((sample * 32767).rounded()))
            switch stream.codec {
            case .pcmu: bytes.append(G711.ulaw(linear))
            case .pcma: bytes.append(G711.alaw(linear))
            case .l16:
                bytes.append(UInt8(truncatingIfNeeded: UInt16(bitPattern: linear) >> 8))
                bytes.append(UInt8(truncatingIfNeeded: UInt16(bitPattern: linear)))
            }
        }
        return bytes
    }

    /// The payload byte of silence, to pad a stream's last packet.
    private var silence: UInt8 {
        switch stream.codec {
        case .pcmu: 0xff
        case .pcma: 0xd5
        case .l16: 0
        }
    }

    // MARK: Pacing (its own thread)

    /// Nanoseconds of audio waiting in the queue. Lock held.
    private func queuedNanoseconds() -> UInt64 {
        let samples = UInt64((queue.count - head) / stream.codec.bytesPerSample)
        return samples * 1_000_000_000 / UInt64(stream.codec.clockRate)
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private static func deadline(_ nanoseconds: UInt64) -> timespec {
        timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }

    /// The pacing thread's `SCHED_FIFO` priority: above ordinary threads, below PipeWire's and
    /// the kernel's own (docs/audio.md, "Pacing").
    static let pacingPriority: Int32 = 10

    private func pace() {
        // Woken late by a busy machine, a packet leaves late: pacing runs ahead of ordinary
        // threads where the system allows it.
        if let refused = RealtimeThread.raiseCallingThread(priority: Self.pacingPriority) {
            let first = session.pacingPriorityNoted.withLock { noted in
                defer { noted = true }
                return !noted
            }
            if first {
                logger.notice(
                    "RTP pacing runs at normal priority: SCHED_FIFO was refused",
                    metadata: ["audio.output": "\(session.outputName)", "audio.error": "\(refused)"])
            }
        }
        lock.lock()
        while !stopping {
            let available = queue.count - head
            if endNow || (streaming && available == 0 && Self.now() >= nextDeadline + Self.idleEnd) {
                endNow = false
                if streaming { endStream() }
                continue
            }
            if available >= packetBytes || (draining && available > 0) {
                var now = Self.now()
                if !streaming {
                    startStream(at: now)
                } else if underrun {
                    // Audio again after running dry: skip the slots that passed, so the timestamp
                    // tells the receiver how long the gap was, and mark the new talkspurt.
                    underrun = false
                    if now > nextDeadline {
                        let skipped = (now - nextDeadline) / ptimeNanoseconds + 1
                        nextDeadline += skipped * ptimeNanoseconds
                        session.counters.withLock {
                            $0.timestamp &+= UInt32(truncatingIfNeeded: skipped * UInt64(stream.samplesPerPacket))
                        }
                    }
                    marker = true
                }
                if now < nextDeadline {
                    _ = lock.wait(until: Self.deadline(nextDeadline))
                    continue
                }
                let deadline = nextDeadline
                let count = min(packetBytes, queue.count - head)
                var payload = queue[head..<(head + count)]
                if count < packetBytes {
                    payload.append(contentsOf: [UInt8](repeating: silence, count: packetBytes - count))
                }
                head += count
                if head > 65536 || head == queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                nextDeadline += ptimeNanoseconds
                let marked = marker
                marker = false
                lock.broadcast()
                lock.unlock()
                let packet = session.counters.withLock { counters in
                    defer {
                        counters.sequence &+= 1
                        counters.timestamp &+= UInt32(stream.samplesPerPacket)
                        counters.packets &+= 1
                        counters.octets &+= UInt32(payload.count)
                        counters.lastDeadline = deadline
                    }
                    return RTPPackets.rtp(
                        payloadType: stream.payloadType, marker: marked, sequence: counters.sequence,
                        timestamp: counters.timestamp, ssrc: session.ssrc, payload: payload)
                }
                now = Self.now()
                let sent = Result { () throws(UDPSenderError) in try sender.send(packet) }
                switch sent {
                case .success:
                    session.statistics.sent(payloadBytes: payload.count, late: now > deadline + 1_000_000)
                case .failure(let error): session.statistics.failed(error.message)
                }
                if now >= lastReport + Self.reportInterval {
                    lastReport = now
                    report(bye: false)
                }
                if now >= lastAnnouncement + Self.announceInterval {
                    lastAnnouncement = now
                    announce(deletion: false)
                }
                lock.lock()
                if case .failure(let error) = sent {
                    fail(.writeFailed(sink: "rtp:\(stream.host)", error.message))
                }
                continue
            }
            if streaming {
                if available < packetBytes && Self.now() >= nextDeadline { underrun = true }
                _ = lock.wait(until: Self.deadline(max(nextDeadline, Self.now()) + (underrun ? Self.idleEnd : 0)))
            } else {
                lock.wait()
            }
        }
        if streaming { endStream() }
        threadExited = true
        lock.broadcast()
        lock.unlock()
    }

    private var marker = false

    /// The first packet after silence: sent now, marked, its timestamp moved on by the silence.
    /// Lock held.
    private func startStream(at now: UInt64) {
        streaming = true
        underrun = false
        marker = true
        nextDeadline = now
        lastReport = 0
        lastAnnouncement = 0
        session.counters.withLock { counters in
            if let last = counters.lastDeadline, now > last {
                let elapsed = (now - last) * UInt64(stream.codec.clockRate) / 1_000_000_000
                counters.timestamp &+= UInt32(truncatingIfNeeded: elapsed)
            }
        }
    }

    /// Ends the stream: an RTCP BYE, and a SAP deletion. Lock held; released while sending.
    private func endStream() {
        streaming = false
        underrun = false
        lock.unlock()
        report(bye: true)
        announce(deletion: true)
        lock.lock()
        lock.broadcast()
    }

    /// A sender report (with BYE at the end of a stream) to the RTCP port.
    private func report(bye: Bool) {
        var wallClock = Glibc.timespec()
        clock_gettime(CLOCK_REALTIME, &wallClock)
        let now = Self.now()
        let packet = session.counters.withLock { counters in
            // The RTP time of this instant: the next packet's timestamp, less what is still to come.
            let ahead =
                Int64(counters.lastDeadline.map { Int64($0) + Int64(ptimeNanoseconds) } ?? Int64(now)) - Int64(now)
            let offset = ahead * Int64(stream.codec.clockRate) / 1_000_000_000
            return RTPPackets.rtcp(
                ssrc: session.ssrc, wallClock: wallClock,
                rtpTimestamp: counters.timestamp &- UInt32(truncatingIfNeeded: offset), packets: counters.packets,
                octets: counters.octets, cname: cname, bye: bye)
        }
        do throws(UDPSenderError) {
            try control.send(packet)
        } catch {
            logger.debug("RTCP not sent", metadata: ["audio.error": "\(error.message)"])
        }
    }

    /// A SAP announcement of the stream, or its deletion.
    private func announce(deletion: Bool) {
        guard let announcer else { return }
        let messageID = UInt16(truncatingIfNeeded: session.ssrc ^ (session.ssrc >> 16))
        do throws(UDPSenderError) {
            try announcer.send(RTPPackets.sap(origin: sapOrigin, messageID: messageID, sdp: sdp, deletion: deletion))
        } catch {
            logger.debug("SAP not sent", metadata: ["audio.error": "\(error.message)"])
        }
    }

    /// A send failed: the stream ends, what waits is dropped, and the next call throws. Lock held.
    private func fail(_ error: AudioOutputError) {
        failure = error
        queue.removeAll()
        head = 0
        endNow = streaming
        lock.broadcast()
    }
}
