import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import Testing

extension SpeakdIntegration.FleetTests {
    @Test func sessionCommandReachesOneKioskAndIsAnsweredLikeHTTP() async throws {
        let fleet = try await Fleet.start(kiosks: [("k1", []), ("k2", [])])
        let topics = FleetTopics(site: Self.site)
        let observer = try await Observer.start(
            fleet.broker, topics: ["speakd/\(Self.site)/replies/#", topics.events("k1"), topics.events("k2")])

        let start = try await observer.ask(topics.session("k1"), #"{"rate": 0.8, "idleTimeout": 60}"#)
        let started = try #require(try await observer.outcomes(for: start, count: 1).first)
        #expect(started.type == .session && started.device == "k1")
        #expect(started.session?.change == .started && started.session?.session.rate == 0.8)
        let k1 = fleet.kiosks[0].daemon.unixClient
        let sessions = try await k1.send("GET", "/v1/session").decode(SessionList.self).sessions
        #expect(sessions.map(\.id) == [started.session?.session.id])
        #expect(
            try await fleet.kiosks[1].daemon.unixClient.send("GET", "/v1/session").decode(SessionList.self)
                .sessions.isEmpty, "one device's command reaches that device only")

        // Refused as the HTTP route refuses it, naming the field.
        let bad = try await observer.ask(topics.session("k1"), #"{"rate": 9}"#)
        let refused = try #require(try await observer.outcomes(for: bad, count: 1).first)
        let http = try await k1.send(
            "PUT", "/v1/session", headers: [("Content-Type", "application/json")], body: Array(#"{"rate": 9}"#.utf8))
        #expect(refused.type == .refused && refused.error?.field == "rate")
        #expect(http.error?.error == refused.error)
        let badEnd = try await observer.ask(topics.sessionEnd("k1"), #"{"rate": 1}"#)
        #expect(try await observer.outcomes(for: badEnd, count: 1).first?.error?.field == "rate")

        let end = try await observer.ask(topics.sessionEnd("k1"), "{}")
        let ended = try #require(try await observer.outcomes(for: end, count: 1).first)
        #expect(ended.session?.change == .ended && ended.session?.reason == .ended)
        #expect(try await k1.send("GET", "/v1/session").decode(SessionList.self).sessions.isEmpty)

        // Both changes reach the kiosk's events topic like every other event.
        let eventsTopic = topics.events("k1")
        #expect(
            await observer.wait(timeout: .seconds(10)) { messages in
                messages.filter {
                    $0.topic == eventsTopic
                        && (try? WireFormat.decoder().decode(FleetReport.self, from: $0.payload))?.type == .session
                }.count == 2
            })
        #expect(
            !observer.messages.contains {
                $0.topic == topics.events("k2") && $0.payload.count > 0
                    && (try? WireFormat.decoder().decode(FleetReport.self, from: $0.payload))?.type == .session
            })
    }
}
