import AnnouncementIntake
import AnnouncementQueue
import Foundation
import IntakeTestSupport
import SpeakAPI
import SpeakService
import SpeakTestSupport
import SpeechModel
import Testing

/// `"private": true` at the intake, below every front: only a private output speaks it, and its
/// text leaves the queue in no event or status but to the holder of its key.
@Suite("Private announcements", .timeLimit(.minutes(1)))
struct PrivateIntakeTests {
    struct Harness {
        let hall = GatedSpeaker(autoComplete: true)
        let headset = GatedSpeaker(autoComplete: true)
        let desk = GatedSpeaker(autoComplete: true)
        let outputs: AnnouncementOutputs
        let intake: AnnouncementIntake
        let runners: [Task<Void, Never>]

        init(privateOutputs: Set<String>) async {
            let shared = SharedQueueState(queues: 3)
            let queues = [
                AnnouncementQueue(speaker: hall, shared: shared),
                AnnouncementQueue(speaker: headset, output: "headset", shared: shared),
                AnnouncementQueue(speaker: desk, output: "desk", shared: shared),
            ]
            outputs = AnnouncementOutputs(
                queues, shared: shared, zoneGroups: ["counter": ["headset", "desk"], "mixed": ["headset", "default"]])
            var intake = AnnouncementIntake(outputs: outputs, renderer: FakeRenderer.tone(), health: SwitchableHealth())
            intake.privateOutputs = privateOutputs
            self.intake = intake
            runners = queues.map { queue in Task { await queue.run() } }
            for queue in queues {
                while !(await queue.isRunning) { await Task.yield() }
            }
        }

        func accept(_ json: String) async throws(SpeakError) -> AnnouncementAccepted {
            try await intake.accept(Data(json.utf8)).accepted
        }

        func tearDown() async {
            await outputs.shutdown()
            for runner in runners { await runner.value }
        }
    }

    @Test(
        "a private request that no private output can take is refused, naming the field",
        arguments: [
            (["headset"], #"{"text": "PIN 4711", "private": true, "output": "default"}"#, "output"),
            (["headset"], #"{"text": "PIN 4711", "private": true, "output": "lobby"}"#, "output"),
            ([], #"{"text": "PIN 4711", "private": true}"#, "private"),
            ([], #"{"text": "PIN 4711", "private": true, "output": "headset"}"#, "output"),
            (["headset", "desk"], #"{"text": "PIN 4711", "private": true}"#, "output"),
            (["headset"], #"{"text": "PIN 4711", "private": 1}"#, "private"),
            // Several zones: every one of them must be private.
            (
                ["headset", "desk"], #"{"text": "PIN 4711", "private": true, "output": ["headset", "default"]}"#,
                "output"
            ),
            (["headset", "desk"], #"{"text": "PIN 4711", "private": true, "output": "mixed"}"#, "output"),
            (["headset"], #"{"text": "PIN 4711", "private": true, "output": "counter"}"#, "output"),
        ] as [(Set<String>, String, String)])
    func refused(privateOutputs: Set<String>, body: String, field: String) async throws {
        let harness = await Harness(privateOutputs: privateOutputs)
        let events = harness.outputs.events(after: 0)
        await #expect {
            _ = try await harness.accept(body)
        } throws: { error in
            (error as? SpeakError)?.response.error.field == field
        }
        await harness.tearDown()
        var count = 0
        for await _ in events { count += 1 }
        #expect(count == 0, "a refused request got events")
        #expect(harness.hall.spoken.isEmpty && harness.headset.spoken.isEmpty && harness.desk.spoken.isEmpty)
    }

    @Test("with no output named it goes to the one private output; its text is in no event, only behind its key")
    func onTheOnePrivateOutputAndShownToItsPosterOnly() async throws {
        let harness = await Harness(privateOutputs: ["headset"])
        let events = harness.outputs.events(after: 0, progress: true)
        let accepted = try await harness.accept(#"{"text": "Your PIN is 4711", "private": true}"#)
        let named = try await harness.accept(#"{"text": "Your PIN is 4712", "private": true, "output": "headset"}"#)
        let plain = try await harness.accept(#"{"text": "Welcome", "output": "headset"}"#)
        let key = try #require(accepted.key)
        #expect(key.count == 32)
        #expect(named.key != nil && named.key != key)
        #expect(plain.key == nil)
        _ = await harness.outputs.finished(id: plain.id)
        #expect(harness.headset.spoken == [accepted.id, named.id, plain.id])
        #expect(harness.hall.spoken.isEmpty)
        // The speaker (and the engine pool behind it) knows not to log the text.
        #expect(harness.headset.speeches.map(\.isPrivate) == [true, true, false])

        let shown = try #require(await harness.outputs.status(id: accepted.id))
        #expect(shown.text.isEmpty && shown.private == true)
        #expect(await harness.intake.status(id: accepted.id, key: key)?.text == "Your PIN is 4711")
        #expect(await harness.intake.status(id: accepted.id, key: named.key)?.text == "")
        #expect(await harness.outputs.status(id: plain.id)?.text == "Welcome")
        #expect(await harness.outputs.status(id: plain.id)?.private == nil)
        await harness.tearDown()

        var seen: [AnnouncementEvent] = []
        for await sequenced in events { seen.append(sequenced.event) }
        #expect(seen.filter { $0.type == .finished }.count == 3)
        for event in seen where event.id != plain.id {
            #expect(event.text.isEmpty && event.word == nil && event.range == nil, "\(event)")
        }
        #expect(seen.filter { $0.id == plain.id }.allSatisfy { $0.text == "Welcome" })
    }

    @Test(
        "in several zones, all private, it is spoken in each; its text is in no event, only behind its key",
        arguments: [#"["headset", "desk"]"#, #""counter""#])
    func inSeveralPrivateZones(output: String) async throws {
        let harness = await Harness(privateOutputs: ["headset", "desk"])
        let events = harness.outputs.events(after: 0, progress: true)
        let accepted = try await harness.accept(#"{"text": "Your PIN is 4711", "private": true, "output": \#(output)}"#)
        let key = try #require(accepted.key)
        #expect(key.count == 32)
        let finished = await harness.outputs.finished(id: accepted.id)
        #expect(
            finished?.success == true && finished?.outputs?.map(\.output) == ["headset", "desk"],
            "\(String(describing: finished))")
        #expect(harness.headset.spoken == [accepted.id] && harness.desk.spoken == [accepted.id])
        #expect(harness.hall.spoken.isEmpty)
        // Each zone's speaker (and the engine pool behind it) knows not to log the text.
        #expect(harness.headset.speeches.map(\.isPrivate) == [true] && harness.desk.speeches.map(\.isPrivate) == [true])

        let shown = try #require(await harness.outputs.status(id: accepted.id))
        #expect(shown.text.isEmpty && shown.private == true)
        #expect(await harness.intake.status(id: accepted.id, key: key)?.text == "Your PIN is 4711")
        #expect(await harness.intake.status(id: accepted.id)?.text == "")
        await harness.tearDown()

        var seen: [AnnouncementEvent] = []
        for await sequenced in events { seen.append(sequenced.event) }
        #expect(seen.filter { $0.type == .finished }.count == 1)
        #expect(seen.filter { $0.type == .started }.count == 2)
        for event in seen {
            #expect(event.text.isEmpty && event.word == nil && event.range == nil, "\(event)")
        }
    }
}
