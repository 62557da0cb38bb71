import Foundation
import SpeakAPI
import SpeakClient
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration.NamedOutputsTests {
    @Test("a hall session that moves to the headset: heard only on the headset; the headset's own session is apart")
    func sessionMovesToTheHeadset() async throws {
        let speakd = try await TwoOutputs.start()
        let client = speakd.daemon.unixClient
        func put(_ body: String) async throws -> SpeakHTTPResponse {
            try await client.send(
                "PUT", "/v1/session", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        }
        #expect(try await put(#"{"moveTo": "headset"}"#).status == 201)
        #expect(try await put(#"{"output": "headset", "volume": 0.8}"#).status == 201)
        let sessions = try await client.send("GET", "/v1/session").decode(SessionList.self).sessions
        #expect(sessions.map(\.output) == ["default", "headset"] && sessions.first?.moveTo == "headset")

        let moved = try await speakd.accept(Self.body("Your PIN please"))
        #expect(await speakd.events.waitForFinished([moved]))
        #expect(speakd.events.events(for: moved).allSatisfy { $0.output == "headset" })
        // Repeated from the headset, where it was heard.
        let again = try await client.send("POST", "/v1/repeat?output=headset")
        #expect(again.status == 202)
        let repeatID = try #require(try again.decode(RepeatResult.self).announcements.first?.id)
        #expect(await speakd.events.waitForFinished([repeatID]))

        // Ending the hall's session forgets what it moved to the headset; the headset's session stays.
        #expect(try await client.send("DELETE", "/v1/session?output=default").status == 200)
        #expect(try await client.send("POST", "/v1/repeat?output=headset").status == 409)
        #expect(
            try await client.send("GET", "/v1/session").decode(SessionList.self).sessions.map(\.output) == ["headset"])
        let (hall, headset) = await speakd.stop()

        #expect(headset.soundingSegments(silenceLevel: Recording.silenceLevel).count >= 2, "said, then said again")
        #expect(
            hall.soundingSegments(silenceLevel: Recording.silenceLevel).isEmpty,
            "the hall heard \(hall.soundingSegments(silenceLevel: Recording.silenceLevel))")
    }
}
