import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// `POST /v1/speech` answers a short render whole and streams a long one as it renders; what
    /// its renders hold at once stays far inside the systemd unit's `MemoryMax=256M` whatever
    /// clients ask for at the same time.
    @Suite(.serialized, .timeLimit(.minutes(4)))
    struct SpeechMemoryTests {
        /// The unit's `MemoryMax` (systemd/speakd.service).
        static let memoryMax = 256 * 1024
        /// What six long renders at once may add to the daemon's resident memory: each holds
        /// 30 s of audio (1.3 MB) and the few seconds its engine renders ahead, where each held
        /// its whole WAV (53 MB for 20 minutes) before renders streamed.
        static let growthLimit = 32 * 1024

        @Test(
            "Six concurrent maximal renders (4,990 characters spelt out, 18 minutes each) to clients that read after 4 s: each streams a whole WAV and the daemon grows by less than 32 MB"
        )
        func sixMaximalRendersStream() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null")
            defer { Task { await speakd.stop() } }
            let letters = Array("abcdefghijklmnopqrstuvwxyz")
            let spelt = String((0..<4_990).map { letters[$0 % letters.count] })
            let body = try JSONSerialization.data(withJSONObject: [
                "ssml": "<speak><say-as interpret-as=\"characters\">\(spelt)</say-as></speak>"
            ])
            let request =
                "POST /v1/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n" + String(decoding: body, as: UTF8.self)
            // Warm: the daemon's own first render, so its growth counts only what renders hold.
            _ = try await speakd.speech(["text": "Warm up"])
            let idle = try memoryKilobytes(speakd.pid, "VmRSS")

            let sampling = Task { () -> (rss: Int, hwm: Int) in
                var peak = 0
                while !Task.isCancelled {
                    peak = max(peak, (try? memoryKilobytes(speakd.pid, "VmRSS")) ?? 0)
                    try? await Task.sleep(for: .milliseconds(50))
                }
                return (peak, (try? memoryKilobytes(speakd.pid, "VmHWM")) ?? 0)
            }
            // Six clients ask at once and start reading 4 s later, as clients on a slow network
            // would: a render finished before its client reads must not be held six times over.
            var connections: [RawConnection] = []
            for _ in 0..<6 {
                let connection = try RawConnection(.unixSocket(path: speakd.socketPath))
                connection.send(request)
                connections.append(connection)
            }
            try await Task.sleep(for: .seconds(4))
            let answers = await withTaskGroup(of: [UInt8]?.self) { group in
                for connection in connections {
                    group.addTask { await connection.readToEndOfStream(within: .seconds(150)) }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            for connection in connections { connection.close() }
            sampling.cancel()
            let peak = await sampling.value
            print("six maximal renders: idle VmRSS \(idle) kB, peak VmRSS \(peak.rss) kB, VmHWM \(peak.hwm) kB")
            #expect(peak.hwm < Self.memoryMax, "VmHWM \(peak.hwm) kB")
            #expect(peak.rss - idle < Self.growthLimit, "six renders grew the daemon by \(peak.rss - idle) kB")

            for answer in answers {
                let response = try #require(answer.flatMap(HTTPAnswer.init), "no complete HTTP answer")
                #expect(response.status == 200, "\(response.status)")
                #expect(response.contentLength == nil && response.chunked, "a long render is streamed")
                #expect(response.complete, "the stream ended before its last chunk")
                let bytes = response.body
                try #require(bytes.count > 44)
                #expect(String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF")
                #expect(String(decoding: bytes[8..<12], as: UTF8.self) == "WAVE")
                // A stream's header gives no length, as WAV streams write it.
                #expect(littleEndian(bytes, at: 4) == 0xFFFF_FFFF, "RIFF size")
                #expect(String(decoding: bytes[36..<40], as: UTF8.self) == "data")
                #expect(littleEndian(bytes, at: 40) == 0xFFFF_FFFF, "data size")
                #expect(littleEndian(bytes, at: 24) == 22_050)
                // Minutes of audio: the whole text was rendered, not a cut-off part of it.
                #expect(bytes.count - 44 > 10 * 60 * 22_050 * 2, "\(bytes.count) bytes")
            }
            #expect(speakd.isRunning)
            #expect(try await speakd.unixClient.send("GET", "/healthz").status == 200)
        }

        @Test(
            "A render whose audio passes the limit (20 minutes) is stopped there: its stream ends without its last chunk"
        )
        func audioOverTheLimitEndsTheStream() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null")
            defer { Task { await speakd.stop() } }
            // 100 spans of 49 letters spelt out, each followed by 10 s of silence the client asked
            // for: about 35 minutes of audio.
            let letters = String(repeating: "qwertyuiop", count: 5).dropLast()
            let spans = (0..<100).map { _ in
                ["text": String(letters), "spellOut": true, "pauseAfter": 10] as [String: Any]
            }
            let body = try JSONSerialization.data(withJSONObject: ["spans": spans])
            let connection = try RawConnection(.unixSocket(path: speakd.socketPath))
            connection.send(
                "POST /v1/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
                    + String(decoding: body, as: UTF8.self))
            let answer = await connection.readToEndOfStream(within: .seconds(120))
            connection.close()
            let response = try #require(answer.flatMap(HTTPAnswer.init), "no HTTP answer")
            #expect(response.status == 200 && response.chunked)
            #expect(!response.complete, "a render cut off at the limit must not look whole")
            let seconds = Double(response.body.count - 44) / (22_050 * 2)
            #expect(seconds > 60 && seconds <= 20 * 60, "\(seconds) s of audio")
            let client = SpeakHTTPClient(endpoint: .unixSocket(path: speakd.socketPath), timeout: .seconds(30))
            #expect(try await client.send("POST", "/v1/speech", json: ["text": "Still rendering"]).status == 200)
            #expect(speakd.log.contains("passed the limit while streaming"))
        }
    }
}

/// An HTTP/1.1 answer read whole from a connection the server closed after it.
private struct HTTPAnswer {
    var status: Int
    var contentLength: Int?
    var chunked: Bool
    /// The body, de-chunked.
    var body: [UInt8]
    /// Whether the body ended as its framing says (a chunked one with its last, empty chunk).
    var complete: Bool

    init?(_ bytes: [UInt8]) {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) })
        else { return nil }
        let head = String(decoding: bytes[0..<end], as: UTF8.self).split(separator: "\r\n")
        guard let statusLine = head.first, let status = Int(statusLine.split(separator: " ")[1]) else { return nil }
        self.status = status
        func header(_ name: String) -> String? {
            head.dropFirst().first { $0.lowercased().hasPrefix(name + ":") }
                .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
        }
        contentLength = header("content-length").flatMap { Int($0) }
        chunked = header("transfer-encoding")?.lowercased() == "chunked"
        let raw = Array(bytes[(end + 4)...])
        guard chunked else {
            body = raw
            complete = contentLength.map { $0 == raw.count } ?? true
            return
        }
        body = []
        complete = false
        var index = 0
        while let lineEnd = (index..<max(index, raw.count - 1)).first(where: { raw[$0] == 13 && raw[$0 + 1] == 10 }),
            let size = Int(String(decoding: raw[index..<lineEnd], as: UTF8.self), radix: 16)
        {
            if size == 0 {
                complete = true
                break
            }
            let start = lineEnd + 2
            guard start + size + 2 <= raw.count else { break }
            body += raw[start..<start + size]
            index = start + size + 2
        }
    }
}

/// The 32-bit little-endian number at `offset` of `bytes`.
private func littleEndian(_ bytes: [UInt8], at offset: Int) -> Int {
    (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
}
