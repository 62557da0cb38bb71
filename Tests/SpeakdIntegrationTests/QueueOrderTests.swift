import Foundation
import SpeakAPI
import SpeakTestSupport
import SpeakdHarness
import SpeechModel
import Testing

extension SpeakdIntegration {
    /// The order announcements are heard in, against the order of `started` events and the contract:
    /// high before default before low, first come first served within a priority.
    @Suite(.serialized, .timeLimit(.minutes(3)))
    struct QueueOrderTests {
        /// One of the announcements posted while the blocker speaks.
        struct Entry: Sendable {
            let text: String
            let pitch: Double
            let priority: AnnouncementPriority
            let overTCP: Bool
        }

        /// One text at six pitches, so the heard F0 alone tells them apart (different texts differ in
        /// their own F0 by more than the pitch steps); pitches interleave the priorities so the heard
        /// order cannot follow from pitch alone; TCP and the Unix socket alternate. The pitches step
        /// by a ratio of about 1.14 from 0.82 (about 80 Hz): a voice at 0.7 (67 Hz, near the F0
        /// estimate's 60 Hz floor) read 72–73 Hz in the recording, almost halfway to the next one.
        static let text = "Please stand clear of the doors"
        static let entries: [Entry] = [
            Entry(text: text, pitch: 0.82, priority: .low, overTCP: true),
            Entry(text: text, pitch: 1.6, priority: .default, overTCP: false),
            Entry(text: text, pitch: 1.22, priority: .high, overTCP: true),
            Entry(text: text, pitch: 0.94, priority: .default, overTCP: false),
            Entry(text: text, pitch: 1.4, priority: .low, overTCP: true),
            Entry(text: text, pitch: 1.07, priority: .high, overTCP: false),
        ]

        static let blockerText =
            "The next train to arrive at platform four is the delayed service to the airport calling at every station on the way"

        @Test(
            "concurrent clients over TCP and the Unix socket: heard order = started order = contract order, no overlap")
        func heardOrderMatchesStartedEventsAndContract() async throws {
            let speakd = try await AudibleDaemon.start()

            // The engine's own rendering of each, for telling them apart by pitch and for durations.
            let blockerBody = announcement(Self.blockerText, pitch: 1.0, priority: .high)
            let blockerReference = try await speakd.reference(blockerBody)
            var references: [Rendered] = []
            for entry in Self.entries {
                references.append(try await speakd.reference(announcement(entry.text, pitch: entry.pitch)))
            }
            let referenceF0 = try references.map { try #require($0.medianF0) }
            for (i, a) in referenceF0.enumerated() {
                for b in referenceF0[(i + 1)...] {
                    try #require(
                        max(a, b) / min(a, b) > 1.08, "reference pitches too close to tell apart: \(referenceF0)")
                }
            }
            // A heard segment is that reference's when its pitch is nearer to it than half the way
            // to the next one: unambiguous, and no looser.
            let sortedF0 = referenceF0.sorted()
            let halfSpacing = zip(sortedF0, sortedF0.dropFirst()).map { log($1 / $0) }.min()! / 2
            for reference in references + [blockerReference] {
                try #require(reference.analysis.longestInnerSilence(silenceLevel: Recording.silenceLevel) < 0.15)
            }

            // A high blocker is never interrupted, so everything posted while it speaks waits.
            let blocker = try await speakd.accept(blockerBody)
            _ = try #require(await speakd.events.waitFor(.started, of: blocker))

            let ids = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for (index, entry) in Self.entries.enumerated() {
                    let client = entry.overTCP ? speakd.tcp : speakd.unix
                    group.addTask {
                        let response = try await post(
                            announcement(entry.text, pitch: entry.pitch, priority: entry.priority), via: client)
                        guard response.status == 202 else {
                            throw SpeakdProcess.Failure(description: "POST answered \(response.status)")
                        }
                        return (index, try response.decode(AnnouncementAccepted.self).id)
                    }
                }
                var ids = [String](repeating: "", count: Self.entries.count)
                for try await (index, id) in group { ids[index] = id }
                return ids
            }
            #expect(await speakd.events.waitForFinished(ids + [blocker], timeout: .seconds(60)))
            let recording = await speakd.stop()
            let received = speakd.events.received
            let events = received.map(\.event)

            // The contract: high before default before low, in order of acceptance (queued events) within each.
            let queuedSequence = Dictionary(
                uniqueKeysWithValues: received.filter { $0.event.type == .queued }.map {
                    ($0.event.id, $0.sequence ?? 0)
                })
            let contractOrder =
                [blocker]
                + Self.entries.indices.sorted { a, b in
                    let (pa, pb) = (Self.entries[a].priority, Self.entries[b].priority)
                    if pa != pb { return pa > pb }
                    return (queuedSequence[ids[a]] ?? .max) < (queuedSequence[ids[b]] ?? .max)
                }.map { ids[$0] }

            let startedOrder = events.filter { $0.type == .started }.map(\.id)
            #expect(startedOrder == contractOrder)

            let segments = recording.segments()
            try #require(
                segments.count == contractOrder.count,
                "heard \(segments.count) segments \(segments), expected \(contractOrder.count)")
            var heardOrder = [blocker]
            for segment in segments.dropFirst() {
                let f0 = try #require(recording.medianF0(segment))
                let nearest = referenceF0.indices.min {
                    abs(log(referenceF0[$0] / f0)) < abs(log(referenceF0[$1] / f0))
                }!
                #expect(
                    abs(log(referenceF0[nearest] / f0)) < halfSpacing,
                    "segment \(segment) F0 \(f0) Hz is near none of \(referenceF0)")
                heardOrder.append(ids[nearest])
            }
            print(
                "heard: \(zip(segments, heardOrder).map { "\($0.0) \(Int(recording.medianF0($0.0) ?? 0)) Hz \($0.1)" }.joined(separator: "; "))"
            )
            print("references: \(referenceF0.map { Int($0) }) Hz; contract order \(contractOrder)")
            #expect(
                heardOrder == contractOrder,
                "segment F0s \(segments.map { recording.medianF0($0) ?? 0 }), references \(referenceF0)")

            // Each heard segment lasts as long as its rendering: none cut short, none running into another.
            let referenceByID = Dictionary(uniqueKeysWithValues: zip(ids, references)).merging([
                blocker: blockerReference
            ]) { $1 }
            for (segment, id) in zip(segments, heardOrder) {
                let expected = referenceByID[id]!.soundingDuration
                #expect(
                    abs(segment.duration - expected) < 0.2 + 0.05 * expected,
                    "segment \(segment) of \(id): expected \(expected) s")
            }
            let renderedTotal = referenceByID.values.reduce(0) {
                $0
                    + $1.analysis.soundingSegments(
                        minimumSilence: 0.01, silenceLevel: Recording.silenceLevel, minimumSound: 0
                    ).reduce(0) { $0 + $1.duration }
            }
            #expect(
                abs(recording.totalSoundingTime - renderedTotal) < 0.05 * renderedTotal,
                "heard \(recording.totalSoundingTime) s of sound, rendered \(renderedTotal) s")

            for id in contractOrder {
                let finished = speakd.events.finished(id)
                #expect(finished.first?.success == true && finished.first?.reason == .completed, "\(id): \(finished)")
            }
            expectExactlyOneFinished(contractOrder, in: events)
        }
    }
}
