import AudioOutput
import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import SpeechRendering
import Testing

extension SpeakdIntegration {
    /// Sessions and "say it again", heard on the private server's null sink: the rate and volume a
    /// session asks for are measured in the recording, not read from what the daemon says.
    @Suite(.serialized, .timeLimit(.minutes(2)))
    struct SessionTests {
        static let text = "Your ticket to Lisboa is ready at counter four."

        @Test("a session's rate 0.7 and volume 0.5 are heard; repeat replays the last one at the session's rate now")
        func rateVolumeAndRepeat() async throws {
            let speakd = try await AudibleDaemon.start()
            let body: [String: Any] = ["text": Self.text, "chime": NSNull()]

            let (_, plain) = try await heard(speakd, body)
            let started = try await putSession(speakd.unix, ["rate": 0.7, "volume": 0.5])
            #expect(started.status == 201, "\(started.text)")
            let session = try started.decode(SessionChange.self)
            #expect(session.change == .started && session.session.rate == 0.7 && session.session.output == "default")

            let (slowID, slow) = try await heard(speakd, body)
            // "Slower, please": the session changes, and the last one is said again at the new rate.
            let changed = try await putSession(speakd.unix, ["rate": 0.5])
            #expect(changed.status == 200, "\(changed.text)")
            #expect(try changed.decode(SessionChange.self).session.volume == 0.5, "a change keeps what it leaves out")

            let start = speakd.recorder.recordedFrames
            let again = try await speakd.unix.send("POST", "/v1/repeat?output=default")
            #expect(again.status == 202, "\(again.text)")
            let repeats = try again.decode(RepeatResult.self).announcements
            #expect(repeats.map(\.repeatOf) == [slowID])
            let repeatID = try #require(repeats.first?.id)
            #expect(await speakd.events.waitForFinished([repeatID]))
            let slower = Array(speakd.recorder.samplesSoFar()[start...])
            _ = await speakd.stop()

            let (plainDuration, slowDuration, slowerDuration) = (
                sounding(plain), sounding(slow), sounding(slower)
            )
            print("session: plain \(plainDuration) s, rate 0.7 \(slowDuration) s, repeated at 0.5 \(slowerDuration) s")
            #expect(
                abs(slowDuration / plainDuration - 1 / 0.7) < 0.15 / 0.7,
                "plain \(plainDuration) s, at rate 0.7 \(slowDuration) s: ratio \(slowDuration / plainDuration)")
            #expect(
                abs(slowerDuration / plainDuration - 1 / 0.5) < 0.15 / 0.5,
                "plain \(plainDuration) s, repeated at rate 0.5 \(slowerDuration) s")
            let format = AudioFormat(sampleRate: speakd.recorder.sampleRate)
            let plainLoudness = try #require(LoudnessMeter.loudness(of: plain, format: format))
            let quietLoudness = try #require(LoudnessMeter.loudness(of: slow, format: format))
            print("session: plain \(plainLoudness) LUFS, volume 0.5 \(quietLoudness) LUFS")
            #expect(
                abs((quietLoudness - plainLoudness) - -6.02) <= 1.5,
                "plain \(plainLoudness) LUFS, volume 0.5 \(quietLoudness) LUFS")

            let events = speakd.events.events
            let repeatEvent = try #require(events.first { $0.type == .repeat })
            #expect(repeatEvent.id == repeatID && repeatEvent.repeatOf == slowID && repeatEvent.text == Self.text)
            let changes = events.filter { $0.type == .session }.compactMap(\.session?.change)
            #expect(changes == [.started, .changed], "\(changes)")
        }

        @Test("a session ends after its idle timeout: the next is heard at the defaults, the old ids are refused")
        func idleTimeout() async throws {
            let speakd = try await AudibleDaemon.start()
            let body: [String: Any] = ["text": Self.text, "chime": NSNull()]
            let reference = try await speakd.reference(body)

            let started = try await putSession(speakd.unix, ["rate": 0.6, "idleTimeout": 1.5])
            let session = try started.decode(SessionChange.self).session
            let (heardID, _) = try await heard(speakd, body)
            let ended = await speakd.events.wait(timeout: .seconds(5)) { events in
                events.contains { $0.type == .session && $0.session?.change == .ended }
            }
            #expect(ended)
            let end = try #require(speakd.events.events.last { $0.type == .session })
            #expect(end.session?.reason == .idle && end.id == session.id)
            #expect(try await speakd.unix.send("GET", "/v1/session").decode(SessionList.self).sessions.isEmpty)

            // Forgotten with the session: nothing to repeat, the id is unknown, the session id expired.
            let nothing = try await speakd.unix.send("POST", "/v1/repeat")
            #expect(nothing.status == 409 && nothing.error?.error.field == "output", "\(nothing.text)")
            #expect(nothing.error?.error.code == "nothingToRepeat")
            let forgotten = try await speakd.unix.send("POST", "/v1/announcements/\(heardID)/repeat")
            #expect(forgotten.status == 404 && forgotten.error?.error.field == "id", "\(forgotten.text)")
            let expired = try await putSession(speakd.unix, ["id": session.id, "rate": 1.2])
            #expect(expired.status == 404 && expired.error?.error.field == "id", "\(expired.text)")
            #expect(expired.error?.error.code == "unknownSession")

            let (_, afterwards) = try await heard(speakd, body)
            _ = await speakd.stop()
            let duration = sounding(afterwards)
            #expect(
                abs(duration / reference.soundingDuration - 1) < 0.1,
                "heard \(duration) s after the session, \(reference.soundingDuration) s at the defaults")
        }

        @Test("bad session and repeat requests are 4xx naming the field; nothing is queued")
        func badInput() async throws {
            let daemon = try await SpeakdProcess.start(audio: "null")
            let client = daemon.unixClient
            let cases: [([String: Any], Int, String)] = [
                (["output": "lobby"], 422, "output"),
                (["moveTo": "lobby"], 422, "moveTo"),
                (["moveTo": "default"], 422, "moveTo"),
                (["rate": 3.5], 422, "rate"),
                (["volume": -1], 422, "volume"),
                (["idleTimeout": 0], 422, "idleTimeout"),
                (["language": "xx-!!"], 422, "language"),
                (["language": "xx-QQ"], 422, "language"),
                (["voice": "nobody-speaks-this"], 422, "voice"),
                (["rate": "fast"], 422, "rate"),
                (["speed": 1], 422, "speed"),
                (["id": "000000000000"], 404, "id"),
            ]
            for (body, status, field) in cases {
                let response = try await putSession(client, body)
                #expect(response.status == status, "\(body): \(response.text)")
                #expect(response.error?.error.field == field, "\(body): \(response.text)")
            }
            for (method, path, status, field) in [
                ("POST", "/v1/announcements/abcdef012345/repeat", 404, "id"),
                ("POST", "/v1/repeat?output=lobby", 422, "output"),
                ("POST", "/v1/repeat?count=17", 422, "count"),
                ("POST", "/v1/repeat?count=two", 422, "count"),
                ("POST", "/v1/repeat", 409, "output"),
                ("DELETE", "/v1/session", 404, "output"),
                ("DELETE", "/v1/session?output=lobby", 422, "output"),
                ("DELETE", "/v1/session?id=000000000000", 404, "id"),
            ] {
                let response = try await client.send(method, path)
                #expect(response.status == status, "\(method) \(path): \(response.text)")
                #expect(response.error?.error.field == field, "\(method) \(path): \(response.text)")
            }
            #expect(try await client.send("GET", "/v1/session").decode(SessionList.self).sessions.isEmpty)
            #expect(
                try await client.send("GET", "/v1/announcements").decode(AnnouncementList.self).announcements.isEmpty)
            _ = await daemon.stop()
        }
    }
}

/// Posts `body`, waits for its finished event, and returns its id with what the sink played
/// from the post until then.
private func heard(_ speakd: AudibleDaemon, _ body: [String: Any]) async throws -> (String, [Int16]) {
    let start = speakd.recorder.recordedFrames
    let id = try await speakd.accept(body)
    #expect(await speakd.events.waitForFinished([id]))
    #expect(speakd.events.finished(id).first?.success == true)
    return (id, Array(speakd.recorder.samplesSoFar()[start...]))
}

/// From the first to the last sounding frame of `samples`, in seconds.
private func sounding(_ samples: [Int16], rate: Int = 22_050) -> Double {
    AudioAnalysis(samples: samples, sampleRate: rate).soundingDuration(silenceLevel: Recording.silenceLevel)
}

/// `PUT /v1/session` with a JSON object body.
private func putSession(_ client: SpeakHTTPClient, _ body: [String: Any]) async throws -> SpeakHTTPResponse {
    try await client.send(
        "PUT", "/v1/session", headers: [("Content-Type", "application/json")],
        body: Array(try JSONSerialization.data(withJSONObject: body)))
}

extension SpeakHTTPResponse {
    /// The body as text, for failure messages.
    fileprivate var text: String { "\(status) \(String(decoding: body, as: UTF8.self))" }
}
