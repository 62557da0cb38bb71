import AudioOutput
import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechRendering
import Testing

extension SpeakdIntegration {
    /// `POST /v1/speech` renders what the hall would hear: chimes, repeats and the announcements'
    /// loudness; `?raw=true` the engine's own audio; keys it cannot honour are refused by name.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct SpeechRenderTests {
        static let text = "Platform four is now closed. Please use platform five for the train to Porto."

        @Test("A render holds the chime, both repeats with their gap, at the announcements' loudness")
        func renderIsWhatTheHallHears() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null")
            defer { Task { await speakd.stop() } }
            let plain = try await speakd.speech(["text": Self.text])
            let raw = try await speakd.speech(["text": Self.text], raw: true)
            let chimed = try await speakd.speech(["text": Self.text, "chime": "ding"])
            let twice = try await speakd.speech(["text": Self.text, "repeat": ["count": 2, "gap": 1.5]])

            // The chime speakd ships, as the daemon holds it: resampled to the engine's rate.
            let ding = try WAVReader(contentsOf: Self.chimes.appendingPathComponent("ding.wav"))
            let dingSeconds = Double(ding.samples.count / ding.channels) / Double(ding.sampleRate)
            #expect(abs(chimed.seconds - plain.seconds - dingSeconds) < 0.02, "\(chimed.seconds) - \(plain.seconds)")

            // Two runs of the speech, 1.5 s of silence between them.
            let runs = AudioAnalysis(samples: twice.samples, sampleRate: twice.sampleRate)
                .soundingSegments(minimumSilence: 1.0)
            #expect(runs.count == 2, "\(runs)")
            #expect(abs(twice.seconds - (2 * plain.seconds + 1.5)) < 0.03, "\(twice.seconds) vs \(plain.seconds)")

            // The default loudness, −16 LUFS; the raw render is the engine's own level.
            let format = AudioFormat(sampleRate: plain.sampleRate, channels: plain.channels)
            let loudness = try #require(LoudnessMeter.loudness(of: plain.samples, format: format))
            #expect(abs(loudness - -16) <= 1, "\(loudness) LUFS")
            let rawLoudness = try #require(LoudnessMeter.loudness(of: raw.samples, format: format))
            #expect(abs(rawLoudness - loudness) > 1, "raw \(rawLoudness) LUFS, hall \(loudness) LUFS")
        }

        @Test("Keys a render cannot honour, and an unknown output or chime, are 422 naming them")
        func unhonouredKeysAreRefusedByName() async throws {
            let speakd = try await SpeakdProcess.start(audio: "null")
            defer { Task { await speakd.stop() } }
            let cases: [(query: String, body: String, field: String)] = [
                ("", #"{"text": "a", "output": "nowhere"}"#, "output"),
                ("", #"{"text": "a", "chime": "gong"}"#, "chime"),
                ("", #"{"text": "a", "expiresAfter": 5}"#, "expiresAfter"),
                ("", #"{"text": "a", "requestId": "r-1"}"#, "requestId"),
                ("", #"{"text": "a", "queue": false}"#, "queue"),
                ("?raw=true", #"{"text": "a", "chime": "ding"}"#, "chime"),
                ("?raw=true", #"{"text": "a", "repeat": {"count": 2}}"#, "repeat"),
            ]
            for (query, body, field) in cases {
                let answer = try await speakd.unixClient.send(
                    "POST", "/v1/speech\(query)", headers: [("Content-Type", "application/json")],
                    body: Array(body.utf8))
                #expect(answer.status == 422, "\(query) \(body): \(answer.status)")
                #expect(answer.error?.error.field == field, "\(query) \(body): \(String(describing: answer.error))")
            }
            // What a Swift client sends with every request, `queue: true`, is no refusal.
            let queued = try await speakd.unixClient.send(
                "POST", "/v1/speech", headers: [("Content-Type", "application/json")],
                body: Array(#"{"text": "a", "queue": true, "priority": "high"}"#.utf8))
            #expect(queued.status == 200)
        }

        static let chimes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Voices/chimes")
    }
}

extension WAVReader {
    /// The length of the audio in seconds.
    fileprivate var seconds: Double { Double(samples.count / channels) / Double(sampleRate) }
}
