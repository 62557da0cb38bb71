import Foundation
import SpeakAPI
import SpeakMQTT
import Testing

@testable import SpeakFleet

@Suite("Fleet parts")
struct FleetUnitTests {
    @Test(arguments: [
        ("mqtt://broker.local", "mqtt://broker.local:1883"),
        ("mqtts://broker.local", "mqtts://broker.local:8883"),
        ("MQTT://10.0.0.5:1884", "mqtt://10.0.0.5:1884"),
        ("mqtt://[::1]:1883", "mqtt://[::1]:1883"),
    ])
    func brokerURLs(_ given: String, _ shown: String) throws {
        #expect(try MQTTBrokerURL(parsing: given).description == shown)
    }

    @Test(arguments: [
        "broker.local:1883", "http://broker.local", "mqtt://", "mqtt://user:secret@broker.local",
        "mqtt://broker.local/topic", "mqtt://broker.local:0",
    ])
    func refusedBrokerURLs(_ given: String) {
        #expect(throws: MQTTError.self) { try MQTTBrokerURL(parsing: given) }
    }

    @Test func topicLevelsRefuseWildcardsAndSeparators() {
        #expect(FleetTopics.problem(with: "hall-2") == nil)
        for bad in ["", "a/b", "a+", "#", "a\u{0}b"] {
            #expect(FleetTopics.problem(with: bad) != nil, "\(bad)")
        }
        let topics = FleetTopics(site: "museum")
        #expect(topics.all == "speakd/museum/all/announce")
        #expect(topics.group("entrance") == "speakd/museum/group/entrance/announce")
        #expect(topics.device("k1") == "speakd/museum/device/k1/announce")
        #expect(topics.status("k1") == "speakd/museum/device/k1/status")
        #expect(topics.session("k1") == "speakd/museum/device/k1/session")
        #expect(topics.sessionEnd("k1") == "speakd/museum/device/k1/session/end")
    }

    @Test func subscriptionsCoverAllGroupsAndTheDevice() {
        let settings = FleetSettings(
            broker: try! MQTTBrokerURL(parsing: "mqtt://b"), device: "k2", site: "s", groups: ["a", "b"])
        #expect(
            settings.subscriptions == [
                "speakd/s/all/announce", "speakd/s/group/a/announce", "speakd/s/group/b/announce",
                "speakd/s/device/k2/announce", "speakd/s/device/k2/session", "speakd/s/device/k2/session/end",
            ])
    }

    @Test func messageExpiryShortensExpiresAfter() {
        #expect(FleetLink.expiresAfter(body: nil, messageExpiry: 5) == 5)
        #expect(FleetLink.expiresAfter(body: 60, messageExpiry: 5) == 5)
        #expect(FleetLink.expiresAfter(body: 2, messageExpiry: 5) == 2)
        #expect(FleetLink.expiresAfter(body: 2, messageExpiry: nil) == 2)
        #expect(FleetLink.expiresAfter(body: nil, messageExpiry: nil) == nil)
    }

    /// Each event names its request through its origin, the moment it is published: the
    /// `queued` event that comes before `submit` returns as well.
    @Test func eventsNameTheirRequestThroughTheirOrigin() {
        func event(_ type: AnnouncementEvent.Kind, origin: AnnouncementOrigin?) -> AnnouncementEvent {
            var event = AnnouncementEvent(type: type, id: "a1", text: "a1", priority: .default, timestamp: Date())
            event.origin = origin
            return event
        }
        let message = MQTTMessage(topic: "speakd/museum/device/k1/announce", payload: Data())
        let origin = FleetLink.origin(of: message, requestId: "r1")
        #expect(origin.front == "mqtt" && origin.requestId == "r1")
        #expect(origin.detail == "topic=speakd/museum/device/k1/announce requestId=r1")
        for type in [AnnouncementEvent.Kind.queued, .started, .finished] {
            #expect(FleetLink.requestId(of: event(type, origin: origin)) == "r1")
        }
        #expect(
            FleetLink.requestId(of: event(.queued, origin: AnnouncementOrigin(front: "http", detail: "tcp token")))
                == nil)
        #expect(FleetLink.requestId(of: event(.queued, origin: nil)) == nil)
    }
}
