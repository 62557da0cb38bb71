import Foundation
import SpeakSchedules
import Testing

/// Expansion of each frequency against instants worked out by hand from a calendar.
@Suite("Schedule timeline")
struct ScheduleTimelineTests {
    @Test func dailyTakesTheStartsSecondAndSkipsAStartThatDoesNotMatch() throws {
        // Lisbon is at +00:00 in December: the start is 23:00 local the evening before.
        let definition = try recurring(
            "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", start: "2026-12-01T00:00:00+01:00", zone: "Europe/Lisbon")
        #expect(
            firstSlots(definition, 3)
                == ["2026-12-01T17:45:00Z", "2026-12-02T17:45:00Z", "2026-12-03T17:45:00Z"].map(instant))
    }

    @Test func theStartIsTheFirstSlotWhenItMatches() throws {
        let definition = try recurring("FREQ=DAILY", start: "2026-04-10T06:15:30Z", zone: "UTC")
        #expect(firstSlots(definition, 2) == ["2026-04-10T06:15:30Z", "2026-04-11T06:15:30Z"].map(instant))
    }

    /// A time with a fraction is heard at or after it, never before: its slot is the next whole second.
    @Test func aFractionInAtOrStartIsRoundedUpNeverDown() throws {
        let once = try ScheduleDefinition(
            json: Data(#"{"announcement": {"text": "a"}, "at": "2026-04-10T10:00:04.788Z"}"#.utf8))
        #expect(once.timeline.firstSlot == instant("2026-04-10T10:00:05Z"))
        let early = SchedulePlanner(once).decide(
            lastSlot: nil, now: instant("2026-04-10T10:00:04Z").addingTimeInterval(0.8), reason: .running)
        #expect(early == .wait(until: instant("2026-04-10T10:00:05Z")))
        let whole = try ScheduleDefinition(
            json: Data(#"{"announcement": {"text": "a"}, "at": "2026-04-10T10:00:04Z"}"#.utf8))
        #expect(whole.timeline.firstSlot == instant("2026-04-10T10:00:04Z"))

        let secondly = try recurring("FREQ=SECONDLY;COUNT=2", start: "2026-04-10T10:00:04.001Z", zone: "UTC")
        #expect(firstSlots(secondly, 3) == ["2026-04-10T10:00:05Z", "2026-04-10T10:00:06Z"].map(instant))
        let daily = try recurring("FREQ=DAILY", start: "2026-04-10T06:15:30.5+00:00", zone: "UTC")
        #expect(firstSlots(daily, 2) == ["2026-04-10T06:15:31Z", "2026-04-11T06:15:31Z"].map(instant))
    }

    @Test func dailyEveryOtherDay() throws {
        let definition = try recurring("FREQ=DAILY;INTERVAL=2", start: "2026-03-01T08:30:00Z", zone: "UTC")
        #expect(
            firstSlots(definition, 3)
                == ["2026-03-01T08:30:00Z", "2026-03-03T08:30:00Z", "2026-03-05T08:30:00Z"].map(instant))
    }

    @Test func weeklyExpandsBydayWithinTheWeek() throws {
        // 2026-06-03 is a Wednesday.
        let definition = try recurring(
            "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9;BYMINUTE=0", start: "2026-06-03T00:00:00Z", zone: "UTC")
        let expected = [
            "2026-06-03T09:00:00Z", "2026-06-05T09:00:00Z", "2026-06-08T09:00:00Z", "2026-06-10T09:00:00Z",
            "2026-06-12T09:00:00Z",
        ]
        #expect(firstSlots(definition, 5) == expected.map(instant))
    }

    @Test func weeklyWithIntervalCountsWeeksFromTheStartsMonday() throws {
        // Start on Sunday 2026-06-07; its week began on Monday 06-01, so the next week used is 06-15.
        let definition = try recurring(
            "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,SU;BYHOUR=8;BYMINUTE=0;BYSECOND=0", start: "2026-06-07T00:00:00Z",
            zone: "UTC")
        #expect(
            firstSlots(definition, 3)
                == ["2026-06-07T08:00:00Z", "2026-06-15T08:00:00Z", "2026-06-21T08:00:00Z"].map(instant))
    }

    @Test func monthlyLastFriday() throws {
        let definition = try recurring(
            "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=18;BYMINUTE=0", start: "2026-01-01T00:00:00Z", zone: "UTC")
        let expected = ["2026-01-30T18:00:00Z", "2026-02-27T18:00:00Z", "2026-03-27T18:00:00Z", "2026-04-24T18:00:00Z"]
        #expect(firstSlots(definition, 4) == expected.map(instant))
    }

    @Test func monthlyOnThe31stSkipsShortMonths() throws {
        let definition = try recurring("FREQ=MONTHLY;COUNT=3", start: "2026-01-31T12:00:00Z", zone: "UTC")
        #expect(
            firstSlots(definition, 5)
                == ["2026-01-31T12:00:00Z", "2026-03-31T12:00:00Z", "2026-05-31T12:00:00Z"].map(instant))
    }

    @Test func yearlyOnTheLeapDayAndYearlyByday() throws {
        let leap = try recurring("FREQ=YEARLY", start: "2024-02-29T12:00:00Z", zone: "UTC")
        #expect(
            firstSlots(leap, 3)
                == ["2024-02-29T12:00:00Z", "2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"].map(instant))
        // The first Monday and the last Sunday of each year.
        let byday = try recurring(
            "FREQ=YEARLY;BYDAY=1MO,-1SU;BYHOUR=10;BYMINUTE=0", start: "2026-01-01T00:00:00Z", zone: "UTC")
        let expected = ["2026-01-05T10:00:00Z", "2026-12-27T10:00:00Z", "2027-01-04T10:00:00Z", "2027-12-26T10:00:00Z"]
        #expect(firstSlots(byday, 4) == expected.map(instant))
    }

    @Test func hourlyExpandsByminute() throws {
        let definition = try recurring("FREQ=HOURLY;BYMINUTE=0,30", start: "2026-07-01T10:10:00Z", zone: "UTC")
        #expect(
            firstSlots(definition, 3)
                == ["2026-07-01T10:30:00Z", "2026-07-01T11:00:00Z", "2026-07-01T11:30:00Z"].map(instant))
    }

    @Test func minutelyLimitedByByhour() throws {
        let definition = try recurring("FREQ=MINUTELY;INTERVAL=15;BYHOUR=9", start: "2026-07-01T08:50:00Z", zone: "UTC")
        let expected = [
            "2026-07-01T09:05:00Z", "2026-07-01T09:20:00Z", "2026-07-01T09:35:00Z", "2026-07-01T09:50:00Z",
            "2026-07-02T09:05:00Z",
        ]
        #expect(firstSlots(definition, 5) == expected.map(instant))
    }

    @Test func secondlyWithCountEnds() throws {
        let definition = try recurring("FREQ=SECONDLY;INTERVAL=5;COUNT=3", start: "2026-05-05T10:00:00Z", zone: "UTC")
        #expect(
            firstSlots(definition, 5)
                == ["2026-05-05T10:00:00Z", "2026-05-05T10:00:05Z", "2026-05-05T10:00:10Z"].map(instant))
        #expect(definition.timeline.nextSlot(after: instant("2026-05-05T10:00:10Z")) == nil)
    }

    @Test func untilIsInclusiveInEachForm() throws {
        let byDate = try recurring("FREQ=DAILY;UNTIL=20260303", start: "2026-03-01T08:30:00Z", zone: "UTC")
        #expect(firstSlots(byDate, 5).count == 3)
        let byUTC = try recurring("FREQ=DAILY;UNTIL=20260302T083000Z", start: "2026-03-01T08:30:00Z", zone: "UTC")
        #expect(firstSlots(byUTC, 5) == ["2026-03-01T08:30:00Z", "2026-03-02T08:30:00Z"].map(instant))
        // A local UNTIL is read in the schedule's zone: 03:30 in New York is 08:30Z in March.
        let local = try recurring(
            "FREQ=DAILY;UNTIL=20260302T033000", start: "2026-03-01T03:30:00-05:00", zone: "America/New_York")
        #expect(firstSlots(local, 5) == ["2026-03-01T08:30:00Z", "2026-03-02T08:30:00Z"].map(instant))
    }

    @Test func slotsBetweenTwoTimes() throws {
        let definition = try recurring("FREQ=MINUTELY;INTERVAL=10", start: "2026-01-01T00:00:00Z", zone: "UTC")
        let slots = definition.timeline.slots(
            after: instant("2026-01-01T00:10:00Z"), through: instant("2026-01-01T00:40:00Z"))
        #expect(slots == ["2026-01-01T00:20:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:40:00Z"].map(instant))
        #expect(
            definition.timeline.lastSlot(atOrBefore: instant("2026-01-01T00:39:59Z")) == instant("2026-01-01T00:30:00Z")
        )
        #expect(
            definition.timeline.firstSlot(atOrAfter: instant("2026-01-01T00:30:00Z")) == instant("2026-01-01T00:30:00Z")
        )
        #expect(
            definition.timeline.firstSlot(atOrAfter: instant("2026-01-01T00:30:00Z").addingTimeInterval(0.1))
                == instant("2026-01-01T00:40:00Z"))
    }

    @Test func aOneTimeScheduleHasOneSlot() throws {
        let definition = try ScheduleDefinition(
            json: Data(#"{"announcement": {"text": "x"}, "at": "2026-12-01T17:45:00+01:00"}"#.utf8))
        let timeline = definition.timeline
        #expect(timeline.firstSlot == instant("2026-12-01T16:45:00Z"))
        #expect(timeline.nextSlot(after: instant("2026-12-01T16:44:59Z")) == instant("2026-12-01T16:45:00Z"))
        #expect(timeline.nextSlot(after: instant("2026-12-01T16:45:00Z")) == nil)
    }

    // MARK: Far from the start

    @Test(.timeLimit(.minutes(1)))
    func aSecondlyRuleStartedAYearAgoFindsItsNextSlotDirectly() throws {
        let plain = try recurring("FREQ=SECONDLY;INTERVAL=7", start: "2025-06-01T00:00:00Z", zone: "Europe/Berlin")
        // 2026-06-01 is 365 days = 31,536,000 s later, a multiple of 7 plus 6.
        #expect(plain.timeline.nextSlot(after: instant("2026-06-01T00:00:00Z")) == instant("2026-06-01T00:00:01Z"))
        #expect(plain.timeline.lastSlot(atOrBefore: instant("2026-06-01T00:00:00Z")) == instant("2026-05-31T23:59:54Z"))

        let counted = try recurring("FREQ=SECONDLY;COUNT=40000000", start: "2025-06-01T00:00:00Z", zone: "UTC")
        #expect(counted.timeline.nextSlot(after: instant("2026-06-01T00:00:00Z")) == instant("2026-06-01T00:00:01Z"))
        // The 40,000,000th slot is 39,999,999 s after the start.
        let last = instant("2025-06-01T00:00:00Z").addingTimeInterval(39_999_999)
        #expect(counted.timeline.lastSlot(atOrBefore: instant("2030-01-01T00:00:00Z")) == last)
        #expect(counted.timeline.nextSlot(after: last) == nil)

        // Limits skip whole hours and days rather than every second.
        let sparse = try recurring(
            "FREQ=SECONDLY;BYDAY=MO;BYHOUR=3;BYMINUTE=0;BYSECOND=0", start: "2025-06-01T00:00:00Z",
            zone: "Europe/Berlin")
        // Monday 2026-06-01 03:00 in Berlin (+02:00).
        #expect(sparse.timeline.nextSlot(after: instant("2026-05-31T00:00:00Z")) == instant("2026-06-01T01:00:00Z"))
        #expect(sparse.timeline.nextSlot(after: instant("2026-06-01T01:00:00Z")) == instant("2026-06-08T01:00:00Z"))
        #expect(
            sparse.timeline.lastSlot(atOrBefore: instant("2026-06-07T00:00:00Z")) == instant("2026-06-01T01:00:00Z"))
    }
}

/// RFC 5545 §3.3.5 at real 2026 transitions: a wall time in the spring-forward gap takes the offset
/// from before the gap, and one the fall-back repeats is its first occurrence.
@Suite("Daylight saving time")
struct DaylightSavingTests {
    @Test func lisbonGapAndOverlap() throws {
        // Lisbon springs forward 01:00 → 02:00 on 2026-03-29 and falls back 02:00 → 01:00 on 2026-10-25.
        let definition = try recurring(
            "FREQ=DAILY;BYHOUR=1;BYMINUTE=30", start: "2026-03-28T00:00:00Z", zone: "Europe/Lisbon")
        let timeline = definition.timeline
        #expect(
            firstSlots(definition, 3)
                == [
                    "2026-03-28T01:30:00Z",  // 01:30 WET
                    "2026-03-29T01:30:00Z",  // 01:30 does not exist: +00:00 from before the gap, 02:30 WEST
                    "2026-03-30T00:30:00Z",  // 01:30 WEST
                ].map(instant))
        let autumn = timeline.slots(after: instant("2026-10-23T12:00:00Z"), through: instant("2026-10-26T12:00:00Z"))
        #expect(
            autumn
                == [
                    "2026-10-24T00:30:00Z",  // 01:30 WEST
                    "2026-10-25T00:30:00Z",  // 01:30 happens twice: the first, still WEST
                    "2026-10-26T01:30:00Z",  // 01:30 WET
                ].map(instant))
    }

    @Test func newYorkGapAndOverlap() throws {
        // New York springs forward 02:00 → 03:00 on 2026-03-08 and falls back 02:00 → 01:00 on 2026-11-01.
        let spring = try recurring(
            "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", start: "2026-03-07T00:00:00-05:00", zone: "America/New_York")
        #expect(
            firstSlots(spring, 3)
                == [
                    "2026-03-07T07:30:00Z",  // 02:30 EST
                    "2026-03-08T07:30:00Z",  // in the gap: -05:00 from before it, 03:30 EDT
                    "2026-03-09T06:30:00Z",  // 02:30 EDT
                ].map(instant))
        let autumn = try recurring(
            "FREQ=DAILY;BYHOUR=1;BYMINUTE=30", start: "2026-10-31T00:00:00-04:00", zone: "America/New_York")
        #expect(
            firstSlots(autumn, 3)
                == [
                    "2026-10-31T05:30:00Z",  // 01:30 EDT
                    "2026-11-01T05:30:00Z",  // twice that night: the first, EDT
                    "2026-11-02T06:30:00Z",  // 01:30 EST
                ].map(instant))
    }

    @Test func berlinGapAndOverlap() throws {
        // Berlin springs forward 02:00 → 03:00 on 2026-03-29 and falls back 03:00 → 02:00 on 2026-10-25.
        let definition = try recurring(
            "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=30", start: "2026-03-22T00:00:00+01:00", zone: "Europe/Berlin")
        #expect(
            firstSlots(definition, 3)
                == [
                    "2026-03-22T01:30:00Z",  // 02:30 CET
                    "2026-03-29T01:30:00Z",  // in the gap: +01:00, 03:30 CEST
                    "2026-04-05T00:30:00Z",  // 02:30 CEST
                ].map(instant))
        #expect(definition.timeline.nextSlot(after: instant("2026-10-24T00:00:00Z")) == instant("2026-10-25T00:30:00Z"))
        #expect(definition.timeline.nextSlot(after: instant("2026-10-25T00:30:00Z")) == instant("2026-11-01T01:30:00Z"))
    }

    @Test func twoTimesThatTheGapMergesAreOneSlot() throws {
        // 01:30 (in the gap) and 02:30 WEST are the same instant on 2026-03-29 in Lisbon.
        let definition = try recurring(
            "FREQ=DAILY;BYHOUR=1,2;BYMINUTE=30", start: "2026-03-29T00:00:00Z", zone: "Europe/Lisbon")
        #expect(
            firstSlots(definition, 3)
                == ["2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-30T01:30:00Z"].map(instant))
    }

    @Test func subDailyRulesStepInElapsedTime() throws {
        // Every hour through New York's fall-back: 01:00 EDT and 01:00 EST are both slots, an hour apart.
        let hourly = try recurring("FREQ=HOURLY", start: "2026-11-01T00:00:00-04:00", zone: "America/New_York")
        #expect(
            firstSlots(hourly, 4)
                == ["2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"].map(
                    instant))
        // Through the spring gap the slots stay an hour apart, and BYHOUR reads the wall clock:
        // 02:00 never shows in Berlin on 2026-03-29, so only 01:00 and 03:00 are slots that night,
        // and the next is 01:00 CEST.
        let limited = try recurring(
            "FREQ=HOURLY;BYHOUR=1,2,3", start: "2026-03-29T00:00:00+01:00", zone: "Europe/Berlin")
        #expect(
            firstSlots(limited, 3)
                == ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T23:00:00Z"].map(instant))
    }
}
