import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import Testing

extension SpeakdIntegration {
    /// `POST /v1/speech` answers whole WAVs; what its renders hold at once stays within the
    /// systemd unit's `MemoryMax=256M` whatever clients ask for at the same time.
    @Suite(.serialized, .timeLimit(.minutes(4)))
    struct SpeechMemoryTests {
        /// The unit's `MemoryMax` (systemd/speakd.service).
        static let memoryMax = 256 * 1024

        @Test(
            "Six concurrent maximal renders (4,990 characters spelt out, 18 minutes each) to clients that read after 4 s: the daemon's peak RSS stays under 256 MB; each answer is a complete WAV or 413 naming ssml"
        )
        func sixMaximalRendersStayUnderMemoryMax() async throws {
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
            print("six maximal renders: peak VmRSS \(peak.rss) kB, VmHWM \(peak.hwm) kB")
            #expect(peak.hwm < Self.memoryMax, "VmHWM \(peak.hwm) kB")
            #expect(peak.rss < Self.memoryMax, "VmRSS \(peak.rss) kB")

            var complete = 0
            for answer in answers {
                let response = try #require(answer.flatMap(HTTPAnswer.init), "no complete HTTP answer")
                if response.status == 200 {
                    let bytes = response.body
                    try #require(bytes.count > 44)
                    #expect(response.contentLength == bytes.count)
                    #expect(String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF")
                    #expect(String(decoding: bytes[8..<12], as: UTF8.self) == "WAVE")
                    #expect(littleEndian(bytes, at: 4) == bytes.count - 8, "RIFF size")
                    #expect(String(decoding: bytes[36..<40], as: UTF8.self) == "data")
                    #expect(littleEndian(bytes, at: 40) == bytes.count - 44, "data size")
                    #expect(littleEndian(bytes, at: 24) == 22_050)
                    // Minutes of audio: the whole text was rendered, not a cut-off part of it.
                    #expect(bytes.count - 44 > 10 * 60 * 22_050 * 2, "\(bytes.count) bytes")
                    complete += 1
                } else {
                    #expect(response.status == 413, "\(response.status)")
                    let error = try JSONDecoder().decode(ErrorResponse.self, from: Data(response.body)).error
                    #expect(error.code == ErrorResponse.Code.tooLarge)
                    #expect(error.field == "ssml")
                }
            }
            print("six maximal renders: \(complete) complete WAVs")
            #expect(speakd.isRunning)
            #expect(try await speakd.unixClient.send("GET", "/healthz").status == 200)
        }

        @Test("A render whose audio passes the limit (20 minutes) is stopped and answered 413 naming the field")
        func audioOverTheLimitIs413() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null")
            defer { Task { await speakd.stop() } }
            // 100 spans of 49 letters spelt out, each followed by 10 s of silence the client asked
            // for: about 35 minutes of audio.
            let letters = String(repeating: "qwertyuiop", count: 5).dropLast()
            let spans = (0..<100).map { _ in
                ["text": String(letters), "spellOut": true, "pauseAfter": 10] as [String: Any]
            }
            let body = Array(try JSONSerialization.data(withJSONObject: ["spans": spans]))
            let client = SpeakHTTPClient(endpoint: .unixSocket(path: speakd.socketPath), timeout: .seconds(120))
            let refused = try await client.send(
                "POST", "/v1/speech", headers: [("Content-Type", "application/json")], body: body)
            #expect(refused.status == 413)
            let error = try #require(refused.error?.error)
            #expect(error.code == ErrorResponse.Code.tooLarge)
            #expect(error.field == "spans")
            #expect(error.message.contains("1200 seconds"), "\(error.message)")
            #expect(try await client.send("POST", "/v1/speech", json: ["text": "Still rendering"]).status == 200)
        }
    }
}

/// An HTTP/1.1 answer read whole from a connection the server closed after it.
private struct HTTPAnswer {
    var status: Int
    var contentLength: Int?
    var body: [UInt8]

    init?(_ bytes: [UInt8]) {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) })
        else { return nil }
        let head = String(decoding: bytes[0..<end], as: UTF8.self).split(separator: "\r\n")
        guard let statusLine = head.first, let status = Int(statusLine.split(separator: " ")[1]) else { return nil }
        self.status = status
        contentLength = head.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
        body = Array(bytes[(end + 4)...])
    }
}

/// The 32-bit little-endian number at `offset` of `bytes`.
private func littleEndian(_ bytes: [UInt8], at offset: Int) -> Int {
    (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
}
