import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// Float WAV files whose samples are NaN or infinite, which no encoder writes but anyone can
    /// put in a file, as clips and as chimes of the running daemon: none of them may take it down.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct NonFiniteSoundTests {
        /// A fresh directory under /tmp, removed by the caller.
        static func directory(_ prefix: String) throws -> URL {
            let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent(
                "speakd-\(prefix)-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return directory
        }

        /// Posts `body` and expects 202; returns the accepted id.
        static func accept(_ body: [String: Any], via client: SpeakHTTPClient) async throws -> String {
            let response = try await post(body, via: client)
            #expect(
                response.status == 202,
                "POST answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
            return try response.decode(AnnouncementAccepted.self).id
        }

        @Test(
            "A clip of NaN or infinite samples dropped into --clips while speakd runs fails its announcement naming it; speakd speaks on"
        )
        func badClipFailsOnlyItsAnnouncement() async throws {
            let clips = try Self.directory("clips")
            defer { try? FileManager.default.removeItem(at: clips) }
            try FloatWAV.write(FloatWAV.tone(), to: clips.appendingPathComponent("tone.wav"))
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--clips", clips.path])
            let events = EventStreamRecorder(client: daemon.unixClient)
            defer { events.stop() }
            try await daemon.waitForEventStreams(1)

            // Added while it runs, the documented way to add clips: each is a 1 kHz tone but for
            // the samples from the 1,000th.
            let added: [(name: String, values: [Float])] = [
                ("nan", [.nan]), ("infinite", [.infinity, -.infinity]), ("minus-infinite", [-.infinity]),
                ("loud", [1.5, -3, 100]),
            ]
            for (name, values) in added {
                try FloatWAV.write(FloatWAV.tone(values: values), to: clips.appendingPathComponent("\(name).wav"))
            }
            let listed = try await daemon.unixClient.send("GET", "/v1/clips").decode(ClipList.self)
            #expect(listed.clips.map(\.name) == ["infinite", "loud", "minus-infinite", "nan", "tone"], "\(listed)")

            for (name, what) in [
                ("nan", "not a number (NaN)"), ("infinite", "infinite"), ("minus-infinite", "infinite"),
            ] {
                let id = try await Self.accept(
                    ["spans": [["text": "Platform four."], ["clip": name]], "chime": NSNull()], via: daemon.unixClient)
                #expect(await events.waitForFinished([id]), "no finished for the clip '\(name)'; log:\n\(daemon.log)")
                let finished = try #require(events.finished(id).first, "log:\n\(daemon.log)")
                #expect(finished.success == false && finished.reason == .failed, "\(finished)")
                #expect(finished.detail?.contains("clip '\(name)'") == true, "\(finished)")
                #expect(finished.detail?.contains("sample 1000") == true, "\(finished)")
                #expect(finished.detail?.contains(what) == true, "\(finished)")
                #expect(daemon.isRunning, "speakd exited on the clip '\(name)':\n\(daemon.log)")
            }

            // The daemon goes on: a clip past full scale, then speech.
            let loud = try await Self.accept(["spans": [["clip": "loud"]], "chime": NSNull()], via: daemon.unixClient)
            let after = try await Self.accept(["text": "Still speaking.", "chime": NSNull()], via: daemon.unixClient)
            #expect(await events.waitForFinished([loud, after]), "log:\n\(daemon.log)")
            #expect(events.finished(loud).map(\.reason) == [.completed], "\(events.finished(loud))")
            #expect(events.finished(after).map(\.reason) == [.completed], "\(events.finished(after))")
            #expect(try await daemon.unixClient.send("GET", "/healthz").status == 200)
            #expect(try await daemon.tcpClient.send("GET", "/healthz").status == 200)
            let (status, _) = await daemon.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)):\n\(daemon.log)")
        }

        @Test(
            "A chime of NaN or infinite samples stops the start: exit 1 with an error naming the chime",
            arguments: [
                ("nan", [Float.nan], "not a number (NaN)"), ("infinite", [.infinity], "infinite"),
                ("minus-infinite", [-.infinity], "infinite"),
            ])
        func badChimeStopsTheStart(name: String, values: [Float], what: String) async throws {
            let chimes = try Self.directory("chimes")
            defer { try? FileManager.default.removeItem(at: chimes) }
            try FloatWAV.write(FloatWAV.tone(), to: chimes.appendingPathComponent("ding.wav"))
            try FloatWAV.write(FloatWAV.tone(values: values), to: chimes.appendingPathComponent("\(name).wav"))
            let refused = try await SpeakdProcess.startRefused(
                audio: "null", arguments: ["--chimes", chimes.path], timeout: .seconds(20))
            // 1 is speakd's refusal; a trap or a signal would be 128 and over.
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.log.contains("--chimes: chime '\(name)'"), "\(refused)")
            #expect(refused.log.contains("sample 1000"), "\(refused)")
            #expect(refused.log.contains(what), "\(refused)")
            #expect(!refused.log.contains("Fatal error"), "\(refused)")
        }

        @Test(
            "A chime with a few samples past full scale has them clamped: its tone is heard at its level, not scaled down by the spikes"
        )
        func loudChimeIsClamped() async throws {
            let chimes = try Self.directory("chimes")
            defer { try? FileManager.default.removeItem(at: chimes) }
            try FloatWAV.write(
                FloatWAV.tone(values: [1.5, -3, 100]), to: chimes.appendingPathComponent("loud.wav"))
            let daemon = try await SpeakdProcess.start(audio: "null", arguments: ["--chimes", chimes.path])
            // The hall's render: the chime's second, then the speech.
            let wav = try await daemon.speech(["text": "Platform four.", "chime": "loud"])
            let chime = wav.samples.prefix(wav.sampleRate * 9 / 10 * wav.channels)
            let rms = (chime.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(chime.count)).squareRoot() / 32768
            // The tone is 0.25 of full scale (RMS 0.18), brought to the loudness target; scaled
            // down so that the 100 fits, as before, it was under 0.01.
            #expect(rms > 0.05, "the chime's RMS is \(rms) of full scale")
            let (status, _) = await daemon.stop()
            #expect(status == 0, "speakd exited with \(String(describing: status)):\n\(daemon.log)")
        }
    }
}
