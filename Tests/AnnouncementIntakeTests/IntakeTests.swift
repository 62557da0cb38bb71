import AnnouncementIntake
import AnnouncementQueue
import Foundation
import IntakeTestSupport
import SpeakAPI
import SpeakService
import SpeakTestSupport
import SpeechModel
import Testing

/// The intake on its own, as every front calls it: it validates an announcement once, and the
/// queue takes what it prepared without checking again.
@Suite(.timeLimit(.minutes(1)))
struct IntakeTests {
    /// A request a front built or changed after decoding it (MQTT's message expiry shortens
    /// `expiresAfter`) is checked here, naming the field; the queue never sees it.
    @Test(arguments: [-1, .nan, .infinity, 86_401] as [Double])
    func invalidExpiryIsRefusedNamingTheField(_ seconds: Double) async throws {
        let running = RunningQueue()
        try await running.waitUntilRunning()
        let intake = AnnouncementIntake(
            outputs: AnnouncementOutputs(single: running.queue), renderer: FakeRenderer.tone(),
            health: SwitchableHealth())
        let events = running.queue.events(after: 0)
        let error = await #expect(throws: SpeakError.self) {
            _ = try await intake.prepare(AnnouncementRequest(utterance: Utterance("bad"), expiresAfter: seconds))
        }
        #expect(error?.response.error.field == "expiresAfter")
        #expect(error?.response.error.message.contains("expiresAfter") == true)
        #expect(error?.code == .invalid)
        await running.shutdown()
        var received: [AnnouncementEvent] = []
        for await event in events { received.append(event.event) }
        #expect(received.isEmpty)
    }

    /// A valid request comes out prepared: the queue's terms carry the request's values, its
    /// speech is the request's utterance, and the queue speaks it.
    @Test func preparedAnnouncementCarriesTheRequestAndItsSpeech() async throws {
        let running = RunningQueue()
        try await running.waitUntilRunning()
        let intake = AnnouncementIntake(
            outputs: AnnouncementOutputs(single: running.queue), renderer: FakeRenderer.tone(),
            health: SwitchableHealth())
        let request = AnnouncementRequest(utterance: Utterance("Platform four."), expiresAfter: 30)
        let prepared = try await intake.prepare(request)
        #expect(
            prepared.delivery.priority == request.delivery.priority && prepared.delivery.queue == request.delivery.queue
        )
        #expect(prepared.delivery.expiresAfter == 30 && prepared.output == "default" && !prepared.delivery.isPrivate)
        #expect(prepared.speech.utterance == request.utterance)
        let accepted = try await intake.submit(prepared)
        #expect(accepted.state == .speaking)
        try await running.waitUntilSpoken(1)
        await running.shutdown()
    }

    /// A sequence's part that the engine refuses (a language no voice speaks) is named as the
    /// client wrote it, `sequence[1].language`, not as the joined whole's `spans[1].language`;
    /// and a sequence whose last part is a clip alone is not refused for a boundary it never gave.
    @Test(arguments: [
        (#"{"sequence": [{"text": "a"}, {"language": "fr", "text": "b"}]}"#, "sequence[1].language"),
        (
            #"{"sequence": [{"text": "a"}, {"spans": [{"text": "b"}, {"text": "c", "language": "fr"}]}]}"#,
            "sequence[1].spans[1].language"
        ),
        (#"{"sequence": [{"language": "fr", "text": "a"}, {"text": "b"}]}"#, "sequence[0].language"),
    ])
    func aSequencesPartIsNamedAsWritten(_ body: String, _ field: String) async throws {
        let running = RunningQueue()
        try await running.waitUntilRunning()
        let intake = AnnouncementIntake(
            outputs: AnnouncementOutputs(single: running.queue), renderer: FakeRenderer.tone(),
            health: SwitchableHealth())
        let error = await #expect(throws: SpeakError.self) { _ = try await intake.accept(Data(body.utf8)) }
        #expect(error?.response.error.field == field, "\(String(describing: error))")
        await running.shutdown()
    }
}
