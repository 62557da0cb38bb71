import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration {
    /// Clips uploaded through `PUT /v1/clips/{name}` into a real clip directory, checked as a clip
    /// of the directory is, listed, fetched back as WAV and played in an announcement.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct UploadClipTests {
        /// A mono WAV of `seconds` of a 1 kHz tone at a quarter of full scale, 22.05 kHz.
        static func toneWAV(seconds: Double = 0.5) -> [UInt8] {
            FloatWAV.bytes(FloatWAV.tone(seconds: seconds))
        }

        /// A mono WAV of silence with a NaN at its 100th sample.
        static func nanWAV() -> [UInt8] {
            var samples = [Float](repeating: 0, count: 4_410)
            samples[100] = .nan
            return FloatWAV.bytes(samples)
        }

        static func directory() throws -> URL {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("upload-clips-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            return url
        }

        static func put(_ name: String, _ body: [UInt8], to client: SpeakHTTPClient, query: String = "") async throws
            -> SpeakHTTPResponse
        {
            try await client.send(
                "PUT", "/v1/clips/\(name)\(query)", headers: [("Content-Type", "audio/wav")], body: body)
        }

        @Test(
            "an uploaded WAV is stored (0640), listed, fetched back as WAV and played in an announcement; NaN is 422 with its reason, a bad name 422 naming name, an existing one 409 without replace"
        )
        func uploadCheckedListedAndPlayed() async throws {
            let clips = try Self.directory()
            defer { try? FileManager.default.removeItem(at: clips) }
            let speakd = try await SpeakdProcess.start(
                audio: "wav:/dev/null", arguments: ["--clips", clips.path, "--clips-upload"])
            defer { Task { await speakd.stop() } }
            let client = speakd.tcpClient

            let stored = try await Self.put("lift-out", Self.toneWAV(), to: client)
            #expect(stored.status == 201, "\(String(decoding: stored.body, as: UTF8.self))")
            #expect(stored.header("location") == "/v1/clips/lift-out")
            let answer = try stored.decode(ClipStored.self)
            #expect(answer.clip.name == "lift-out" && answer.clip.file == "lift-out.wav" && !answer.replaced)
            #expect(abs(answer.clip.duration - 0.5) < 0.01)
            // A quarter-scale 1 kHz tone: about 12 dB under full scale's -3 LUFS, measured as it was stored.
            let loudness = try #require(answer.clip.loudness)
            #expect(abs(loudness - -15.0) < 1, "\(loudness) LUFS")
            let attributes = try FileManager.default.attributesOfItem(
                atPath: clips.appendingPathComponent("lift-out.wav").path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o640)
            // Nothing else is left in the directory: the temporary file was renamed.
            #expect(try FileManager.default.contentsOfDirectory(atPath: clips.path) == ["lift-out.wav"])

            let listed = try await client.send("GET", "/v1/clips").decode(ClipList.self)
            #expect(listed.clips.map(\.name) == ["lift-out"])

            let fetched = try await client.send("GET", "/v1/clips/lift-out")
            #expect(fetched.status == 200)
            #expect(fetched.header("content-type") == "audio/wav")
            let fetchedFile = clips.deletingLastPathComponent().appendingPathComponent(
                "fetched-\(UUID().uuidString).wav")
            try Data(fetched.body).write(to: fetchedFile)
            defer { try? FileManager.default.removeItem(at: fetchedFile) }
            let wav = try WAVReader(contentsOf: fetchedFile)
            #expect(wav.channels == 1 && wav.sampleRate == 22_050)
            #expect(abs(Double(wav.samples.count) / 22_050 - 0.5) < 0.01, "\(wav.samples.count) samples")
            #expect(wav.samples.map { abs(Int($0)) }.max() ?? 0 > 7000, "the tone, as recorded")

            let accepted = try await client.send(
                "POST", "/v1/announcements?wait=true", json: ["spans": [["clip": "lift-out"]]])
            #expect(accepted.status == 200, "\(String(decoding: accepted.body, as: UTF8.self))")
            #expect(try accepted.decode(AnnouncementEvent.self).reason == .completed)

            let nan = try await Self.put("broken", Self.nanWAV(), to: client)
            #expect(nan.status == 422)
            let nanError = try nan.decode(ErrorResponse.self).error
            #expect(nanError.code == "invalidClip" && nanError.field == "body")
            #expect(nanError.message.contains("sample 100") && nanError.message.contains("NaN"), "\(nanError.message)")

            let junk = try await Self.put("junk", Array("RIFF this is not audio".utf8), to: client)
            #expect(junk.status == 422)
            #expect(try junk.decode(ErrorResponse.self).error.field == "body")

            for name in ["..hidden", "-dash", "a%2Fb", "%2E%2E"] {
                let bad = try await Self.put(name, Self.toneWAV(), to: client)
                #expect(bad.status == 422, "\(name)")
                let error = try bad.decode(ErrorResponse.self).error
                #expect(error.field == "name" && error.code == "invalidClipName", "\(name): \(error)")
            }

            let again = try await Self.put("lift-out", Self.toneWAV(seconds: 1), to: client)
            #expect(again.status == 409)
            #expect(try again.decode(ErrorResponse.self).error.field == "name")
            let replaced = try await Self.put("lift-out", Self.toneWAV(seconds: 1), to: client, query: "?replace=true")
            #expect(replaced.status == 200)
            #expect(try replaced.decode(ClipStored.self).replaced)
            #expect(
                abs((try await client.send("GET", "/v1/clips").decode(ClipList.self).clips.first?.duration ?? 0) - 1)
                    < 0.01)

            // Only the good clip was ever written.
            #expect(try FileManager.default.contentsOfDirectory(atPath: clips.path) == ["lift-out.wav"])
            let unknown = try await client.send("GET", "/v1/clips/nothing")
            #expect(unknown.status == 404)
            #expect(try unknown.decode(ErrorResponse.self).error.code == "unknownClip")
        }

        @Test("without --clips-upload an upload is 403 clipUploadsOff naming the setting, and nothing is written")
        func uploadsOffByDefault() async throws {
            let clips = try Self.directory()
            defer { try? FileManager.default.removeItem(at: clips) }
            let speakd = try await SpeakdProcess.start(audio: "wav:/dev/null", arguments: ["--clips", clips.path])
            defer { Task { await speakd.stop() } }
            let refused = try await Self.put("lift-out", Self.toneWAV(), to: speakd.tcpClient)
            #expect(refused.status == 403)
            let error = try refused.decode(ErrorResponse.self).error
            #expect(error.code == "clipUploadsOff" && error.message.contains("--clips-upload"), "\(error)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: clips.path).isEmpty)
        }
    }
}
