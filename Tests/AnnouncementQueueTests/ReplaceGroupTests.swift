import AnnouncementQueue
import Foundation
import SpeakAPI
import SpeechModel
import Testing

/// `replaceGroup` (only the newest of a group matters) and `dropIfBusy` (worth nothing later),
/// the primitives SSIP's text, notification and progress priorities are built on.
@Suite("Replace groups and drop-if-busy", .timeLimit(.minutes(1)))
struct ReplaceGroupTests {
    private func submit(
        _ harness: QueueHarness, _ text: String, group: String? = nil, dropIfBusy: Bool = false,
        replaces: [String] = []
    ) async throws -> AnnouncementAccepted {
        var prepared = PreparedAnnouncement.unrendered(text)
        prepared.delivery.replaceGroup = group
        prepared.delivery.dropIfBusy = dropIfBusy
        prepared.delivery.replaces = replaces
        return try await harness.queue.submit(prepared)
    }

    @Test func theNewestOfAGroupReplacesTheWaitingAndTheSpeakingOnes() async throws {
        try await withQueue { harness in
            let speaking = try await submit(harness, "Board at 10:00", group: "arrivals")
            await harness.speaker.waitForStarts(1)
            let other = try await submit(harness, "Unrelated")
            let waiting = try await submit(harness, "Board at 10:01", group: "arrivals")
            let newest = try await submit(harness, "Board at 10:02", group: "arrivals")
            let replacedWaiting = await harness.recorder.waitForFinished(waiting.id)
            #expect(replacedWaiting?.reason == .discarded)
            #expect(replacedWaiting?.detail?.contains("replaceGroup 'arrivals'") == true)
            let replacedSpeaking = await harness.queue.finished(id: speaking.id)
            #expect(replacedSpeaking?.reason == .discarded)
            // The unrelated one keeps its place, then the newest of the group speaks.
            await harness.speaker.waitForStarts(2)
            harness.speaker.complete(other.id)
            #expect(await harness.queue.finished(id: other.id)?.reason == .completed)
            await harness.speaker.waitForStarts(3)
            harness.speaker.complete(newest.id)
            #expect(await harness.queue.finished(id: newest.id)?.reason == .completed)
            await harness.shutDown()
            expectExactlyOneFinishedEach(harness.recorder.events)
        }
    }

    @Test func dropIfBusyIsDroppedOnlyWhenSomethingSpeaksOrWaits() async throws {
        try await withQueue { harness in
            let idle = try await submit(harness, "Nothing else is speaking", dropIfBusy: true)
            #expect(idle.state == .speaking)
            await harness.speaker.waitForStarts(1)
            let dropped = try await submit(harness, "Door closing", dropIfBusy: true)
            #expect(dropped.state == .finished)
            let finished = await harness.recorder.waitForFinished(dropped.id)
            #expect(finished?.reason == .discarded)
            #expect(finished?.success == false)
            harness.speaker.complete(idle.id)
            #expect(await harness.queue.finished(id: idle.id)?.reason == .completed)
            await harness.shutDown()
            #expect(harness.recorder.events.filter { $0.id == dropped.id }.map(\.type) == [.queued, .finished])
            expectExactlyOneFinishedEach(harness.recorder.events)
        }
    }

    /// `replaces` finishes other groups' announcements, waiting or speaking, and leaves its own
    /// group and the ungrouped alone; `dropIfBusy` does not count what it replaces as busy.
    @Test func replacesFinishesTheNamedGroupsAndDropIfBusyIgnoresThem() async throws {
        try await withQueue { harness in
            let speaking = try await submit(harness, "Delay notice one", group: "delays")
            await harness.speaker.waitForStarts(1)
            let waiting = try await submit(harness, "Delay notice two", group: "delays")
            let board = try await submit(harness, "Board", group: "arrivals")
            let other = try await submit(harness, "Unrelated")
            let newBoard = try await submit(harness, "New board", replaces: ["delays"])
            // The speaking notice was replaced by the newer one of its group, which the board replaces.
            #expect(await harness.queue.finished(id: speaking.id)?.reason == .discarded)
            let replaced = await harness.recorder.waitForFinished(waiting.id)
            #expect(replaced?.reason == .discarded)
            #expect(replaced?.detail?.contains("which replaces 'delays'") == true)
            // Busy with the board and the unrelated one: dropped, though it replaces the board.
            let dropped = try await submit(harness, "Notice", dropIfBusy: true, replaces: ["arrivals"])
            #expect(dropped.state == .finished)
            for (index, id) in [board.id, other.id, newBoard.id].enumerated() {
                await harness.speaker.waitForStarts(2 + index)
                harness.speaker.complete(id)
                #expect(await harness.queue.finished(id: id)?.reason == .completed)
            }
            // Busy only with what it replaces: it goes, and replaces it.
            let again = try await submit(harness, "Delay notice three", group: "delays")
            await harness.speaker.waitForStarts(5)
            let notice = try await submit(harness, "Notice", dropIfBusy: true, replaces: ["delays"])
            #expect(notice.state != .finished)
            #expect(await harness.queue.finished(id: again.id)?.reason == .discarded)
            await harness.speaker.waitForStarts(6)
            harness.speaker.complete(notice.id)
            #expect(await harness.queue.finished(id: notice.id)?.reason == .completed)
        }
    }

    @Test func theRequestFieldsDecodeAndAreChecked() throws {
        let request = try AnnouncementRequest.decode(
            json: Data(#"{"text":"Hi","replaceGroup":"arrivals","dropIfBusy":true}"#.utf8))
        #expect(request.delivery.replaceGroup == "arrivals")
        #expect(request.delivery.dropIfBusy)
        #expect(try AnnouncementRequest.decode(json: Data(#"{"text":"Hi"}"#.utf8)).delivery.dropIfBusy == false)
        #expect {
            try AnnouncementRequest.decode(json: Data(#"{"text":"Hi","replaceGroup":""}"#.utf8))
        } throws: { error in
            (error as? RequestBodyError)?.errorResponse.error.field == "replaceGroup"
        }
        #expect {
            try AnnouncementRequest.decode(json: Data(#"{"text":"Hi","dropIfBusy":"yes"}"#.utf8))
        } throws: { error in
            (error as? RequestBodyError)?.errorResponse.error.field == "dropIfBusy"
        }
        #expect(
            try AnnouncementRequest.decode(json: Data(#"{"text":"Hi","replaces":["a","b"]}"#.utf8)).delivery.replaces
                == [
                    "a", "b",
                ])
        for (body, field) in [
            (#"{"text":"Hi","replaces":"a"}"#, "replaces"), (#"{"text":"Hi","replaces":["a",""]}"#, "replaces[1]"),
            (#"{"text":"Hi","replaces":["1","2","3","4","5","6","7","8","9"]}"#, "replaces"),
        ] {
            #expect {
                try AnnouncementRequest.decode(json: Data(body.utf8))
            } throws: { error in
                (error as? RequestBodyError)?.errorResponse.error.field == field
            }
        }
    }
}
