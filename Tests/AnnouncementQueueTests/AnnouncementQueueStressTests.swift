import AnnouncementQueue
import SpeakAPI
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

/// A value shared between the tasks of a test.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<Result>(_ body: (inout sending Value) -> sending Result) -> sending Result {
        mutex.withLock(body)
    }
}

@Suite("Announcement queue under concurrency", .timeLimit(.minutes(1)))
struct AnnouncementQueueStressTests {
    @Test(arguments: [1, 7, 42, 1234, 99_991] as [UInt64])
    func exactlyOneFinishedPerAcceptedAnnouncement(seed: UInt64) async throws {
        await withQueue(capacity: 6, eventHistory: 4096) { harness in
            let accepted = Shared<[String]>([])
            let refused = Shared(0)
            let stop = Shared(false)
            let speaker = harness.speaker
            let clock = harness.clock
            let queue = harness.queue

            // Plays the sink: completes or fails whatever is speaking, brings audio back, moves time.
            let driver = Task {
                var random = SplitMix64(seed: seed ^ 0xD1CE)
                while !stop.withLock({ $0 }) {
                    if let id = speaker.current {
                        switch random.next() % 5 {
                        case 0, 1, 2: speaker.resume(id, with: .success(SpeechOutcome(voice: "v")))
                        case 3: speaker.resume(id, with: .failure(FakeSpeaker.SpeakFailure(description: "lost")))
                        default: break
                        }
                    }
                    speaker.becomeAvailable()
                    if random.next() % 3 == 0 {
                        clock.advance(by: .milliseconds(Int64(random.next() % 400)))
                    }
                    await Task.yield()
                }
            }

            await withTaskGroup { group in
                for worker in 0..<8 as Range<UInt64> {
                    group.addTask {
                        var random = SplitMix64(seed: seed &* 31 &+ worker)
                        for step in 0..<60 {
                            switch random.next() % 12 {
                            case 0..<6:
                                let priority = AnnouncementPriority.allCases[Int(random.next() % 3)]
                                let prepared = PreparedAnnouncement.unrendered(
                                    "w\(worker) s\(step)", priority: priority, queue: random.next() % 2 == 0,
                                    expiresAfter: random.next() % 3 == 0 ? Double(random.next() % 1000) / 1000 : nil)
                                do {
                                    let submission = try await queue.submit(prepared)
                                    accepted.withLock { $0.append(submission.id) }
                                } catch {
                                    #expect((error as? AnnouncementQueueError) == .queueFull)
                                    refused.withLock { $0 += 1 }
                                }
                            case 6, 7:
                                let ids = accepted.withLock { $0 }
                                if !ids.isEmpty {
                                    do throws(AnnouncementQueueError) {
                                        try await queue.cancel(id: ids[Int(random.next() % UInt64(ids.count))])
                                    } catch {
                                        // Only an id the queue has finished and since forgotten.
                                        #expect(error.isUnknownAnnouncement)
                                    }
                                }
                            case 8:
                                if random.next() % 4 == 0 {
                                    await queue.cancelAll()
                                }
                            case 9:
                                let id = accepted.withLock { $0.last }
                                _ = await queue.status(id: id ?? "none")
                            case 10:
                                let snapshot = await queue.snapshot()
                                #expect(snapshot.count <= 7)
                                #expect(snapshot.dropFirst().allSatisfy { $0.state == .queued })
                            default:
                                let ids = accepted.withLock { $0 }
                                if let id = ids.last {
                                    _ = await queue.finished(id: id)
                                }
                            }
                            await Task.yield()
                        }
                    }
                }
            }
            stop.withLock { $0 = true }
            await driver.value
            await harness.shutDown()

            let acceptedIDs = accepted.withLock { $0 }
            let events = harness.recorder.sequenced
            #expect(Set(acceptedIDs).count == acceptedIDs.count)
            #expect(events.map(\.sequence) == Array(1...UInt64(events.count)))
            #expect(Set(events.map(\.event.id)) == Set(acceptedIDs))

            var byID: [String: [SequencedAnnouncementEvent]] = [:]
            for event in events {
                byID[event.event.id, default: []].append(event)
            }
            let startedBySpeaker = speaker.started
            #expect(Set(startedBySpeaker).count == startedBySpeaker.count)
            #expect(!speaker.overlapped)
            var reasons: [FinishReason: Int] = [:]
            for id in acceptedIDs {
                let types = byID[id, default: []].map(\.event.type)
                let wasStarted = types.contains(.started)
                #expect(
                    types == (wasStarted ? [.queued, .started, .finished] : [.queued, .finished]), "\(id): \(types)")
                #expect(wasStarted == startedBySpeaker.contains(id))
                guard let finished = byID[id]?.last?.event, let reason = finished.reason else { continue }
                reasons[reason, default: 0] += 1
                #expect(finished.success == (reason == .completed))
                let allowed: Set<FinishReason> =
                    wasStarted
                    ? [.completed, .interrupted, .cancelled, .failed, .shutdown]
                    : [.cancelled, .expired, .discarded, .shutdown]
                #expect(allowed.contains(reason), "\(id) finished \(reason)")
            }
            // The run exercised the paths it is meant to, not just one of them.
            #expect(acceptedIDs.count > 50)
            #expect(reasons[.completed, default: 0] > 0)
            #expect(reasons[.cancelled, default: 0] > 0)
        }
    }
}
