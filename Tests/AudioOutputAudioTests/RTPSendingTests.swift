import AudioOutput
import Foundation
import SpeechRendering
import Testing

@testable import AudioOutput

/// A real RTP output sending to a loopback port, received by a UDP socket. In the audio tier,
/// one test at a time: it measures the pacing of the packets as they arrive.
@Suite(.serialized) struct RTPSendingTests {
    @Test(.timeLimit(.minutes(1)))
    func sendsPacedContinuousPackets() async throws {
        let receiver = try RTPTestReceiver()
        let spec = try AudioSinkSpec(parsing: "rtp://127.0.0.1:\(receiver.port)?codec=pcmu&ptime=20&sap=off")
        var options = AudioSinkOptions()
        options.outputName = "platform1"
        let format = AudioFormat(sampleRate: 22050)
        let sink = try await spec.makeSink(format: format, options: options)
        // Received as they arrive, so arrival times are the packets' own.
        let collecting = Task { try await receiver.collect(until: { $0.byes >= 2 }) }
        let tone = (0..<22050).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 22050)) }
        for start in stride(from: 0, to: tone.count, by: 2205) {
            try await sink.write(PCMChunk(samples: Array(tone[start..<min(start + 2205, tone.count)])))
        }
        try await sink.drain()
        // Longer than the 0.3 s after which a stream ends, with room for a loaded machine.
        try await Task.sleep(for: .seconds(1))
        for start in stride(from: 0, to: 11025, by: 2205) {
            try await sink.write(PCMChunk(samples: Array(tone[start..<(start + 2205)])))
        }
        try await sink.drain()
        let packets = try await collecting.value
        await sink.close()

        let data = packets.rtp
        #expect(data.count >= 74 && data.count <= 80, "\(data.count) packets for 1.5 s at 20 ms")
        guard let first = data.first else { return }
        #expect(first.payloadType == 0)
        #expect(first.ssrc == (try RTPStream(parsing: "//127.0.0.1:5004")).ssrc(forOutput: "platform1"))
        #expect(data.allSatisfy { $0.payload.count == 160 && $0.ssrc == first.ssrc })
        for (previous, next) in zip(data, data.dropFirst()) {
            #expect(next.sequence == previous.sequence &+ 1, "sequence numbers continue across streams")
        }
        // Two streams, each starting with the marker bit.
        let marked = data.indices.filter { data[$0].marker }
        #expect(marked.count == 2 && marked.first == 0)
        if marked.count == 2 {
            let second = marked[1]
            for index in 1..<data.count where index != second {
                #expect(data[index].timestamp == data[index - 1].timestamp &+ 160)
            }
            // The pause between the streams moved the timestamp on by at least its length.
            #expect(data[second].timestamp &- data[second - 1].timestamp >= 160 + 8000 * 4 / 10)
            let spacing = (1..<second).map { data[$0].arrival - data[$0 - 1].arrival }.sorted()
            let median = spacing[spacing.count / 2]
            #expect(median > .milliseconds(18) && median < .milliseconds(22), "median spacing \(median)")
        }
        // The tone is heard: µ-law decoded, a 440 Hz tone of amplitude 8000 has an RMS near 5660.
        let middle = data[10..<40].flatMap { $0.payload.map { Double(G711.linear(ulaw: $0)) } }
        let rms = (middle.map { $0 * $0 }.reduce(0, +) / Double(middle.count)).squareRoot()
        #expect(rms > 5000 && rms < 6300, "RMS \(rms)")
        #expect(packets.reports >= 2, "a sender report with each stream")
    }

    @Test(.timeLimit(.minutes(1)))
    func flushStopsWithinOnePacket() async throws {
        let receiver = try RTPTestReceiver()
        let spec = try AudioSinkSpec(parsing: "rtp://127.0.0.1:\(receiver.port)?codec=l16&rate=16000&sap=off")
        let sink = try await spec.makeSink(format: AudioFormat(sampleRate: 22050), options: AudioSinkOptions())
        let collecting = Task { try await receiver.collect(until: { $0.byes >= 1 }) }
        let chunk = PCMChunk(samples: [Int16](repeating: 1000, count: 2205))
        for _ in 0..<10 { try await sink.write(chunk) }
        let flushed = ContinuousClock.now
        try await sink.flush()
        let packets = try await collecting.value
        await sink.close()
        let late = packets.rtp.filter { $0.arrival > flushed + .milliseconds(20) }
        #expect(late.isEmpty, "\(late.count) packets after the flush")
        #expect(packets.rtp.first?.payloadType == 96)
        #expect(packets.rtp.first?.payload.count == 640)
        // Network byte order: 1000 × 32767/32768 resampled is near 1000.
        if let payload = packets.rtp.dropFirst(2).first?.payload {
            let value = Int16(bitPattern: UInt16(payload[100]) << 8 | UInt16(payload[101]))
            #expect(abs(Int(value) - 1000) < 20)
        }
    }
}

/// What a test receiver got: RTP packets with their arrival times, and RTCP counts.
struct ReceivedRTP {
    struct Packet {
        var marker: Bool
        var payloadType: Int
        var sequence: UInt16
        var timestamp: UInt32
        var ssrc: UInt32
        var payload: [UInt8]
        var arrival: ContinuousClock.Instant
    }
    var rtp: [Packet] = []
    var reports = 0
    var byes = 0
}

/// Two UDP sockets on 127.0.0.1, an even port for RTP and the next for RTCP.
final class RTPTestReceiver: @unchecked Sendable {
    // @unchecked Sendable: the descriptors are only read after init; each is closed once in deinit.
    let port: Int
    private let rtpSocket: Int32
    private let rtcpSocket: Int32

    init() throws {
        for _ in 0..<50 {
            let port = Int.random(in: 20000...30000) * 2
            let rtp = Self.bind(port)
            guard rtp >= 0 else { continue }
            let rtcp = Self.bind(port + 1)
            guard rtcp >= 0 else {
                close(rtp)
                continue
            }
            self.port = port
            rtpSocket = rtp
            rtcpSocket = rtcp
            return
        }
        throw CocoaError(.fileNoSuchFile)
    }

    deinit {
        close(rtpSocket)
        close(rtcpSocket)
    }

    private static func bind(_ port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// Receives on a thread of its own until `done` or 10 s.
    func collect(until done: @escaping @Sendable (ReceivedRTP) -> Bool) async throws -> ReceivedRTP {
        await withCheckedContinuation { continuation in
            let thread = Thread { [self] in
                var received = ReceivedRTP()
                let limit = ContinuousClock.now + .seconds(10)
                var buffer = [UInt8](repeating: 0, count: 2048)
                while !done(received) && ContinuousClock.now < limit {
                    var ready = [
                        pollfd(fd: rtpSocket, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: rtcpSocket, events: Int16(POLLIN), revents: 0),
                    ]
                    guard poll(&ready, 2, 20) > 0 else { continue }
                    let arrival = ContinuousClock.now
                    if ready[0].revents != 0 {
                        let count = recv(rtpSocket, &buffer, buffer.count, 0)
                        guard count >= 12 else { continue }
                        let bytes = Array(buffer[..<count])
                        received.rtp.append(
                            ReceivedRTP.Packet(
                                marker: bytes[1] & 0x80 != 0, payloadType: Int(bytes[1] & 0x7f),
                                sequence: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
                                timestamp: bytes[4..<8].reduce(0) { $0 << 8 | UInt32($1) },
                                ssrc: bytes[8..<12].reduce(0) { $0 << 8 | UInt32($1) }, payload: Array(bytes[12...]),
                                arrival: arrival))
                    }
                    if ready[1].revents != 0 {
                        let control = recv(rtcpSocket, &buffer, buffer.count, 0)
                        // A compound packet: SR, SDES, and BYE at the end of a stream.
                        var offset = 0
                        while offset + 4 <= control {
                            let type = buffer[offset + 1]
                            if type == 200 { received.reports += 1 }
                            if type == 203 { received.byes += 1 }
                            offset += ((Int(buffer[offset + 2]) << 8 | Int(buffer[offset + 3])) + 1) * 4
                        }
                    }
                }
                continuation.resume(returning: received)
            }
            thread.start()
        }
    }
}
