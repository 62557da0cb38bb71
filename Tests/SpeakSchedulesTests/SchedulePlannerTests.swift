import Foundation
import SpeakSchedules
import Testing

/// The runner's decisions with injected wall-clock times: missed slots at start, clock steps while
/// running, and the end of a schedule.
@Suite("Schedule planner")
struct SchedulePlannerTests {
    private static func daily(missed: String) throws -> SchedulePlanner {
        SchedulePlanner(
            try recurring(
                "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", start: "2026-12-01T00:00:00Z", zone: "Europe/Lisbon", missed: missed
            ))
    }

    @Test func atStartWithSkipEveryMissedSlotIsPassedOver() throws {
        let planner = try Self.daily(missed: #""skip""#)
        let now = instant("2026-12-03T18:00:00Z")
        let first = planner.decide(lastSlot: instant("2026-12-01T17:45:00Z"), now: now, reason: .start)
        #expect(first == .skip(through: instant("2026-12-03T17:45:00Z")))
        let second = planner.decide(lastSlot: instant("2026-12-03T17:45:00Z"), now: now, reason: .start)
        #expect(second == .wait(until: instant("2026-12-04T17:45:00Z")))
    }

    @Test func atStartWithSpeakWithinOnlyTheMostRecentIsSpoken() throws {
        let planner = try Self.daily(missed: #"{"speakWithin": 3600}"#)
        // Down since before the 2nd: the 2nd and 3rd passed; only the 3rd, 15 minutes old, is spoken.
        let decision = planner.decide(
            lastSlot: instant("2026-12-01T17:45:00Z"), now: instant("2026-12-03T18:00:00Z"), reason: .start)
        #expect(decision == .fire(slot: instant("2026-12-03T17:45:00Z")))
        let after = planner.decide(
            lastSlot: instant("2026-12-03T17:45:00Z"), now: instant("2026-12-03T18:00:05Z"), reason: .start)
        #expect(after == .wait(until: instant("2026-12-04T17:45:00Z")))
        // Older than speakWithin: passed over.
        let late = planner.decide(
            lastSlot: instant("2026-12-01T17:45:00Z"), now: instant("2026-12-03T18:46:00Z"), reason: .start)
        #expect(late == .skip(through: instant("2026-12-03T17:45:00Z")))
        // speakWithin is for slots missed while down, not for a running daemon.
        let running = planner.decide(
            lastSlot: instant("2026-12-01T17:45:00Z"), now: instant("2026-12-03T18:00:00Z"), reason: .running)
        #expect(running == .skip(through: instant("2026-12-03T17:45:00Z")))
    }

    @Test func aPausedScheduleMissesNothingButSpeaksNothing() throws {
        let definition = try recurring(
            "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", start: "2026-12-01T00:00:00Z", zone: "Europe/Lisbon",
            missed: #"{"speakWithin": 3600}"#)
        let paused = try definition.merging(patch: Data(#"{"paused": true}"#.utf8))
        let planner = SchedulePlanner(paused)
        let last = instant("2026-12-01T17:45:00Z")
        // A due slot passes where it would have been spoken, at start and while running.
        for reason in [SchedulePlanner.Reason.start, .running] {
            #expect(
                planner.decide(lastSlot: last, now: instant("2026-12-02T17:45:01Z"), reason: reason)
                    == .pass(slot: instant("2026-12-02T17:45:00Z")))
        }
        // Slots too old to speak are still skipped as missed; the next one is still waited for.
        #expect(
            planner.decide(lastSlot: last, now: instant("2026-12-03T19:00:00Z"), reason: .start)
                == .skip(through: instant("2026-12-03T17:45:00Z")))
        #expect(
            planner.decide(
                lastSlot: instant("2026-12-02T17:45:00Z"), now: instant("2026-12-02T18:00:00Z"), reason: .running)
                == .wait(until: instant("2026-12-03T17:45:00Z")))
    }

    @Test func aFirstStartWithNoRecordWaitsForTheFirstSlot() throws {
        let planner = try Self.daily(missed: #""skip""#)
        #expect(
            planner.decide(lastSlot: nil, now: instant("2026-11-30T12:00:00Z"), reason: .start)
                == .wait(until: instant("2026-12-01T17:45:00Z")))
    }

    @Test func aSlotIsFiredWithinLatenessOnly() throws {
        let planner = try Self.daily(missed: #""skip""#)
        let last = instant("2026-12-01T17:45:00Z")
        #expect(
            planner.decide(lastSlot: last, now: instant("2026-12-02T17:45:00Z"), reason: .running)
                == .fire(slot: instant("2026-12-02T17:45:00Z")))
        #expect(
            planner.decide(lastSlot: last, now: instant("2026-12-02T17:45:02Z"), reason: .running)
                == .fire(slot: instant("2026-12-02T17:45:00Z")))
        #expect(
            planner.decide(
                lastSlot: last, now: instant("2026-12-02T17:45:02Z").addingTimeInterval(0.001), reason: .running)
                == .skip(through: instant("2026-12-02T17:45:00Z")))
    }

    private static func everyFiveMinutes() throws -> SchedulePlanner {
        SchedulePlanner(try recurring("FREQ=MINUTELY;INTERVAL=5", start: "2026-06-01T12:00:00Z", zone: "UTC"))
    }

    @Test func aForwardStepSkipsTheBurstButTheNextSlotFires() throws {
        let planner = try Self.everyFiveMinutes()
        // Last fired 12:00; NTP steps the clock from 12:01 to 12:17:30, over 12:05, 12:10 and 12:15.
        let jumped = planner.decide(
            lastSlot: instant("2026-06-01T12:00:00Z"), now: instant("2026-06-01T12:17:30Z"), reason: .running)
        #expect(jumped == .skip(through: instant("2026-06-01T12:15:00Z")))
        let next = planner.decide(
            lastSlot: instant("2026-06-01T12:15:00Z"), now: instant("2026-06-01T12:17:30Z"), reason: .running)
        #expect(next == .wait(until: instant("2026-06-01T12:20:00Z")))
        let due = planner.decide(
            lastSlot: instant("2026-06-01T12:15:00Z"), now: instant("2026-06-01T12:20:00Z").addingTimeInterval(0.4),
            reason: .running)
        #expect(due == .fire(slot: instant("2026-06-01T12:20:00Z")))
        // A step that lands just after a slot speaks that one slot, not the ones it stepped over.
        let landed = planner.decide(
            lastSlot: instant("2026-06-01T12:00:00Z"), now: instant("2026-06-01T12:15:01Z"), reason: .running)
        #expect(landed == .fire(slot: instant("2026-06-01T12:15:00Z")))
    }

    @Test func aBackwardStepNeverFiresASlotTwice() throws {
        let planner = try Self.everyFiveMinutes()
        let last = instant("2026-06-01T12:20:00Z")
        // Fired 12:20, then the clock steps back to 12:11: 12:15 and 12:20 come round again but are not slots again.
        #expect(
            planner.decide(lastSlot: last, now: instant("2026-06-01T12:11:00Z"), reason: .running)
                == .wait(until: instant("2026-06-01T12:25:00Z")))
        #expect(
            planner.decide(lastSlot: last, now: instant("2026-06-01T12:20:00Z"), reason: .running)
                == .wait(until: instant("2026-06-01T12:25:00Z")))
        #expect(
            planner.decide(
                lastSlot: last, now: instant("2026-06-01T12:25:00Z").addingTimeInterval(0.2), reason: .running)
                == .fire(slot: instant("2026-06-01T12:25:00Z")))
    }

    @Test func anExhaustedCountFinishes() throws {
        let planner = SchedulePlanner(
            try recurring("FREQ=SECONDLY;INTERVAL=5;COUNT=3", start: "2026-05-05T10:00:00Z", zone: "UTC"))
        #expect(
            planner.decide(
                lastSlot: instant("2026-05-05T10:00:05Z"), now: instant("2026-05-05T10:00:10Z"), reason: .running)
                == .fire(slot: instant("2026-05-05T10:00:10Z")))
        #expect(
            planner.decide(
                lastSlot: instant("2026-05-05T10:00:10Z"), now: instant("2026-05-05T10:00:10Z"), reason: .running)
                == .finished)
        #expect(
            planner.decide(lastSlot: nil, now: instant("2026-05-06T00:00:00Z"), reason: .start)
                == .skip(through: instant("2026-05-05T10:00:10Z")))
    }

    @Test func aOneTimeScheduleFiresOnceThenFinishes() throws {
        let planner = SchedulePlanner(
            try ScheduleDefinition(json: Data(#"{"announcement": {"text": "x"}, "at": "2026-12-01T17:45:00Z"}"#.utf8)))
        let at = instant("2026-12-01T17:45:00Z")
        #expect(planner.decide(lastSlot: nil, now: instant("2026-12-01T17:00:00Z"), reason: .start) == .wait(until: at))
        #expect(planner.decide(lastSlot: nil, now: at.addingTimeInterval(1), reason: .running) == .fire(slot: at))
        #expect(planner.decide(lastSlot: at, now: at.addingTimeInterval(1), reason: .running) == .finished)
        #expect(planner.decide(lastSlot: nil, now: at.addingTimeInterval(60), reason: .start) == .skip(through: at))
    }

    @Test func sleepIsCutIntoChunks() {
        let now = instant("2026-06-01T12:00:00Z")
        let chunk = Duration.seconds(60)
        #expect(SchedulePlanner.sleepDuration(until: now.addingTimeInterval(3600), now: now, maxChunk: chunk) == chunk)
        #expect(
            SchedulePlanner.sleepDuration(until: now.addingTimeInterval(1.5), now: now, maxChunk: chunk)
                == .milliseconds(1500))
        #expect(SchedulePlanner.sleepDuration(until: now.addingTimeInterval(-5), now: now, maxChunk: chunk) == .zero)
    }
}

/// A monotonic reading a test chooses.
private struct TestInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> TestInstant { TestInstant(offset: offset + duration) }
    func duration(to other: TestInstant) -> Duration { other.offset - offset }
    static func < (a: TestInstant, b: TestInstant) -> Bool { a.offset < b.offset }
}

@Suite("Clock jump detector")
struct ClockJumpDetectorTests {
    private let wall = instant("2026-06-01T12:00:00Z")
    private let monotonic = TestInstant(offset: .seconds(1000))

    @Test func clocksMovingTogetherAreNoJump() {
        let detector = ClockJumpDetector(wall: wall, monotonic: monotonic)
        let later = monotonic.advanced(by: .seconds(60))
        #expect(!detector.jumped(wall: wall.addingTimeInterval(60.4), monotonic: later))
        #expect(!detector.jumped(wall: wall.addingTimeInterval(59.2), monotonic: later))
    }

    @Test func aStepEitherWayIsAJump() {
        let detector = ClockJumpDetector(wall: wall, monotonic: monotonic)
        let later = monotonic.advanced(by: .seconds(60))
        #expect(detector.jumped(wall: wall.addingTimeInterval(60 + 300), monotonic: later))
        #expect(detector.step(wall: wall.addingTimeInterval(60 + 300), monotonic: later) == .seconds(300))
        #expect(detector.jumped(wall: wall.addingTimeInterval(60 - 1.5), monotonic: later))
        #expect(detector.step(wall: wall.addingTimeInterval(60 - 1.5), monotonic: later) == .milliseconds(-1500))
    }
}
