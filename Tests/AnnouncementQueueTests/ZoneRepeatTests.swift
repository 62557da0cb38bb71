import AnnouncementQueue
import SpeakAPI
import SpeechModel
import Synchronization
import Testing

/// A speaker that places a zone's sound itself (`placesZoneStart`), as the engine's does: each
/// playing lasts `playing`, and each repeat waits at `ZoneStart.repeatStart` for the other zones.
/// It notes the instant each playing is to be heard.
final class PlacingSpeaker: AnnouncementSpeaker {
    let playing: Duration
    private let heard = Mutex<[ContinuousClock.Instant?]>([])

    init(playing: Duration) {
        self.playing = playing
    }

    var placesZoneStart: Bool { true }

    func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        let zone = try #require(announcement.zoneStart)
        let repeats = announcement.delivery.repeat ?? AnnouncementRepeat(count: 1, gap: 0)
        var start: ContinuousClock.Instant? = zone.heardAt
        for index in 0..<repeats.count {
            if index > 0 {
                start = await zone.repeatStart(index, ended: .now, gap: .milliseconds(Int64(repeats.gap * 1000)))
                try Task.checkCancellation()
            }
            heard.withLock { $0.append(start) }
            try await Task.sleep(until: (start ?? .now) + playing, clock: .continuous)
        }
        return SpeechOutcome(voice: nil)
    }

    func waitUntilAvailable() async {}

    /// When each playing was to be heard, in order; nil for one placed on its own.
    var playings: [ContinuousClock.Instant?] { heard.withLock { $0 } }
}

/// Repeats of one announcement in several zones: each heard in every zone at one instant.
@Suite("Zone repeats", .timeLimit(.minutes(1)))
struct ZoneRepeatTests {
    /// Two zones whose playings differ in length (as a slower sink's would end later), the
    /// platform's receiver 40 ms behind.
    struct Zones {
        let hall = PlacingSpeaker(playing: .milliseconds(50))
        let platform = PlacingSpeaker(playing: .milliseconds(150))
        let outputs: AnnouncementOutputs
        let runners: [Task<Void, Never>]

        init() async {
            let shared = SharedQueueState(queues: 2)
            let hallQueue = AnnouncementQueue(speaker: hall, shared: shared)
            let platformQueue = AnnouncementQueue(
                speaker: platform, output: "platform", receiverDelay: .milliseconds(40), shared: shared)
            outputs = AnnouncementOutputs(
                [hallQueue, platformQueue], shared: shared, zoneGroups: ["concourse": ["default", "platform"]])
            runners = [hallQueue, platformQueue].map { queue in Task { await queue.run() } }
            for queue in [hallQueue, platformQueue] {
                while !(await queue.isRunning) { await Task.yield() }
            }
        }

        func submit(count: Int, gap: Double) async throws -> String {
            var prepared = PreparedAnnouncement(
                speech: .unrendered("Last call for flight 402"),
                delivery: AnnouncementDelivery(priority: .default, queue: true))
            prepared.delivery.repeat = AnnouncementRepeat(count: count, gap: gap)
            return try await outputs.submit(prepared, zones: try outputs.zones(named: ["concourse"], list: false)).id
        }

        func shutDown() async {
            await outputs.shutdown()
            for runner in runners { await runner.value }
        }
    }

    @Test("each repeat is heard in both zones at one instant, the gap after the later zone's end")
    func repeatsAreHeardTogether() async throws {
        let zones = await Zones()
        let id = try await zones.submit(count: 3, gap: 0.1)
        let finished = try #require(await zones.outputs.finished(id: id))
        await zones.shutDown()
        #expect(finished.success == true)
        let hall = zones.hall.playings
        let platform = zones.platform.playings
        #expect(hall.count == 3 && platform.count == 3)
        #expect(hall == platform, "the zones placed their playings at \(hall) and \(platform)")
        for index in 1..<min(platform.count, 3) {
            guard let previous = platform[index - 1], let next = platform[index] else {
                Issue.record("playing \(index + 1) was not placed with the other zone")
                continue
            }
            // The platform's playing is the longer: the next is heard the gap after it ended.
            #expect(next - previous >= .milliseconds(250), "playing \(index + 1) came \(next - previous) after")
        }
    }

    @Test("a cancel while one zone waits for the other between repeats stops both, with one finished")
    func cancelBetweenRepeatsStopsEveryZone() async throws {
        let zones = await Zones()
        let id = try await zones.submit(count: 3, gap: 0.1)
        // The hall has ended its first playing and waits for the platform's.
        try await Task.sleep(for: .milliseconds(170))
        #expect(try await zones.outputs.cancel(id: id))
        let finished = try #require(await zones.outputs.finished(id: id))
        await zones.shutDown()
        #expect(finished.success == false)
        #expect(finished.outputs?.map(\.reason) == [.cancelled, .cancelled])
        #expect(zones.hall.playings.count == 1 && zones.platform.playings.count == 1)
    }
}
