import Foundation
import Logging
import SpeakAPI
import SpeakMQTT
import SpeakService
import SpeakTestSupport
import Synchronization
import Testing

@testable import SpeakFleet

/// The fleet link against the fake service, with no broker: each message is handed to the link
/// as its client would hand it, and what the link publishes is recorded. It goes through the
/// door's calls (the same `accept` as every front's, sessions, schedules), and each refusal code
/// becomes a `refused` report with the service's error body, on the events topic and the
/// message's response topic.
@Suite(.timeLimit(.minutes(1))) struct FleetDoorTests {
    /// What the link published, in order.
    final class Published: Sendable {
        private let messages = Mutex<[MQTTOutgoing]>([])
        var all: [MQTTOutgoing] { messages.withLock { $0 } }
        func append(_ message: MQTTOutgoing) { messages.withLock { $0.append(message) } }

        /// The reports published to `topic`, decoded.
        func reports(to topic: String) throws -> [FleetReport] {
            try all.filter { $0.topic == topic }.map {
                try WireFormat.decoder().decode(FleetReport.self, from: $0.payload)
            }
        }

        /// Waits up to five seconds for a report to `topic`.
        func waitForReport(to topic: String) async throws -> FleetReport? {
            for _ in 0..<500 {
                if let report = try reports(to: topic).first { return report }
                try await Task.sleep(for: .milliseconds(10))
            }
            return nil
        }
    }

    static let settings = FleetSettings(
        broker: try! MQTTBrokerURL(parsing: "mqtt://127.0.0.1:1"), device: "k1", site: "museum")
    static let announce = settings.topics.device("k1")
    static let events = settings.topics.events("k1")

    private func link(_ service: FakeSpeakService, schedules: Bool = false) throws -> (FleetLink, Published) {
        let published = Published()
        let link = try FleetLink(
            settings: Self.settings, service: service, logger: Logger(label: "test"), schedules: schedules,
            outbox: { published.append($0) })
        return (link, published)
    }

    private func message(_ topic: String, _ json: String, correlation: String = "c1") -> MQTTMessage {
        MQTTMessage(
            topic: topic, payload: Data(json.utf8), responseTopic: "reply/1", correlationData: Data(correlation.utf8))
    }

    /// An announcement is one `accept` with the message's origin, and its `finished` from the
    /// service answers on the response topic; delivered again, it is not accepted twice.
    @Test func anAnnouncementIsAcceptedThroughTheDoorAndAnswered() async throws {
        let service = FakeSpeakService()
        let (link, published) = try link(service)
        let sent = message(Self.announce, #"{"text": "Gate four", "requestId": "r1"}"#)
        await link.handle(sent)
        let answer = try #require(try await published.waitForReport(to: "reply/1"))
        #expect(answer.type == .finished && answer.requestId == "r1" && answer.event?.id == "fake-1")
        await link.handle(sent)
        #expect(service.calls.map(\.description) == ["accept Gate four from mqtt", "finished fake-1"])
    }

    /// A refusal of `accept` is a `refused` report with the service's body, on the events topic
    /// and the response topic; the service counted it, so the link does not; and the request id
    /// is forgotten, so the sender's retry is a new attempt.
    @Test(arguments: SpeakError.Code.everyCode)
    func aRefusalIsARefusedReport(_ code: SpeakError.Code) async throws {
        let service = FakeSpeakService()
        let refusal = SpeakError(code, name: "\(code)Code", "refused by the test", field: "text")
        service.refuse("accept", with: refusal)
        let (link, published) = try link(service)
        let sent = message(Self.announce, #"{"text": "Gate four", "requestId": "r2"}"#)
        await link.handle(sent)
        for topic in [Self.events, "reply/1"] {
            let reports = try published.reports(to: topic)
            #expect(reports.count == 1, "\(topic)")
            #expect(reports.first?.type == .refused && reports.first?.requestId == "r2")
            #expect(reports.first?.error == refusal.response.error)
        }
        #expect(published.all.first { $0.topic == "reply/1" }?.correlationData == Data("c1".utf8))
        #expect(service.countedRefusals.isEmpty)
        await link.handle(sent)
        #expect(service.calls.map(\.name) == ["accept", "accept"])
    }

    /// A body the service's limits refuse never reaches `accept`: the link counts it through the
    /// service and reports it.
    @Test func aBodyRefusedBeforeTheDoorIsCountedThroughIt() async throws {
        let service = FakeSpeakService()
        let (link, published) = try link(service)
        await link.handle(message(Self.announce, #"{"txt": "Gate four"}"#))
        let report = try #require(try published.reports(to: "reply/1").first)
        #expect(report.type == .refused && report.error?.field == "txt")
        #expect(service.countedRefusals.map(\.code) == [.invalid])
        #expect(service.calls.isEmpty)
    }

    @Test func sessionCommandsGoThroughTheDoor() async throws {
        let service = FakeSpeakService()
        let (link, published) = try link(service)
        await link.handle(message(Self.settings.topics.session("k1"), #"{"output": "hall", "rate": 1.2}"#))
        await link.handle(message(Self.settings.topics.sessionEnd("k1"), #"{"output": "hall"}"#))
        #expect(try published.reports(to: "reply/1").map(\.type) == [.session, .session])
        service.refuse(
            "putSession", with: SpeakError(.notFound, name: "unknownOutput", "no output 'x'", field: "output"))
        await link.handle(message(Self.settings.topics.session("k1"), #"{"output": "x"}"#))
        #expect(try published.reports(to: "reply/1").last?.error?.code == "unknownOutput")
        #expect(service.calls.map(\.description) == ["putSession hall", "endSession hall", "putSession x"])
    }

    /// With state, the fleet's schedule commands are the service's schedule calls; each answer
    /// is a `schedule` report, and a refusal a `refused` one with the service's body.
    @Test func scheduleCommandsGoThroughTheDoor() async throws {
        let service = FakeSpeakService()
        let (link, published) = try link(service, schedules: true)
        let topic = Self.settings.topics.deviceSchedules("k1")
        let at = Date().addingTimeInterval(3_600).formatted(.iso8601)
        await link.handle(
            message(
                topic,
                #"{"action": "add", "schedule": {"id": "lunch", "announcement": {"text": "Lunch"}, "at": "\#(at)"}}"#
            ))
        await link.handle(message(topic, #"{"action": "update", "id": "lunch", "patch": {"paused": true}}"#))
        await link.handle(message(topic, #"{"action": "delete", "id": "lunch"}"#))
        await link.handle(message(topic, #"{"action": "delete", "id": "lunch"}"#))
        let reports = try published.reports(to: "reply/1")
        #expect(reports.map(\.type) == [.schedule, .schedule, .schedule, .refused])
        #expect(reports.compactMap(\.event?.schedule?.change) == [.created, .updated, .deleted])
        #expect(reports.last?.error?.code == "unknownSchedule")
        #expect(
            service.calls.map(\.description) == [
                "createSchedule lunch", "updateSchedule lunch", "deleteSchedule lunch", "deleteSchedule lunch",
            ])
    }
}
