import Foundation
import SpeakSchedules
import Testing

/// RRULE text: what is refused and how the refusal reads, and the text given back.
@Suite("Recurrence rule parsing")
struct RecurrenceRuleTests {
    @Test(arguments: [
        (
            "FREQ=DAILY;BYWEEKNO=3",
            "rrule: unknown part 'BYWEEKNO' (speakd knows FREQ, INTERVAL, BYDAY, BYHOUR, BYMINUTE, BYSECOND, COUNT, UNTIL)"
        ),
        ("FREQ=DAILY;FREQ=WEEKLY", "rrule: FREQ is given twice"),
        (
            "FREQ=DAILY;COUNT=3;UNTIL=20261231",
            "rrule: COUNT and UNTIL together; give one (RFC 5545 does not allow both)"
        ),
        ("FREQ=MINUTELY;BYSECOND=60", "rrule: BYSECOND 60 is out of range 0…59 (leap seconds are not scheduled)"),
        (
            "FREQ=daily",
            "rrule: FREQ 'daily' is not one of SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY, YEARLY (upper case)"
        ),
        ("FREQ=DAILY;BYHOUR=", "rrule: BYHOUR has an empty value"),
        ("FREQ=DAILY;BYHOUR=1,,2", "rrule: BYHOUR has an empty item"),
        ("FREQ=DAILY;BYHOUR=24", "rrule: BYHOUR 24 is out of range 0…23"),
        ("FREQ=DAILY;BYMINUTE=-1", "rrule: BYMINUTE '-1' is not a whole number"),
        ("FREQ=DAILY;INTERVAL=0", "rrule: INTERVAL 0 is out of range 1…1000000"),
        ("FREQ=DAILY;COUNT=x", "rrule: COUNT 'x' is not a whole number"),
        ("FREQ=WEEKLY;BYDAY=1MO", "rrule: BYDAY '1MO' has an ordinal, which only FREQ=MONTHLY or YEARLY allows"),
        ("FREQ=MONTHLY;BYDAY=6MO", "rrule: BYDAY '6MO': a month has at most 5 of each weekday"),
        ("FREQ=WEEKLY;BYDAY=mo", "rrule: BYDAY 'mo' is not a weekday (MO, TU, WE, TH, FR, SA, SU, upper case)"),
        ("BYHOUR=3", "rrule: FREQ is required, e.g. FREQ=DAILY"),
        ("FREQ=DAILY;", "rrule: empty part (two ';' in a row, or one at an end)"),
        ("FREQ=DAILY;UNTIL=2026", "rrule: UNTIL '2026' is not YYYYMMDD, YYYYMMDDTHHMMSS or YYYYMMDDTHHMMSSZ"),
        ("FREQ=DAILY;UNTIL=20260230", "rrule: UNTIL '20260230' is not a date"),
        ("", "rrule: empty rule; it needs at least FREQ, e.g. FREQ=DAILY"),
        (
            "FREQ=DAILY;BYHOUR=9;COUNT=200000",
            "rrule: COUNT=200000 is over 100000, speakd's limit for a rule whose slots are counted one by one "
                + "(higher counts need FREQ=SECONDLY, MINUTELY or HOURLY without BYDAY and without BY parts that limit it)"
        ),
    ])
    func refusedRulesSayWhy(_ text: String, _ expected: String) {
        #expect(throws: ScheduleError.self) { try RecurrenceRule(parsing: text) }
        do {
            _ = try RecurrenceRule(parsing: text)
        } catch {
            #expect(error.field == "rrule")
            #expect(error.description == expected)
        }
    }

    @Test(arguments: [
        "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9;BYMINUTE=0",
        "FREQ=MONTHLY;INTERVAL=2;COUNT=6;BYDAY=-1FR,1MO;BYHOUR=18",
        "FREQ=DAILY;UNTIL=20261231T235959Z;BYHOUR=7,19;BYMINUTE=0;BYSECOND=30",
        "FREQ=YEARLY;UNTIL=20300101",
        "FREQ=SECONDLY;INTERVAL=5;COUNT=3",
    ])
    func descriptionGivesTheRuleBack(_ text: String) throws {
        let rule = try RecurrenceRule(parsing: text)
        #expect(rule.description == text)
        #expect(try RecurrenceRule(parsing: rule.description) == rule)
    }

    @Test func descriptionIsCanonical() throws {
        let rule = try RecurrenceRule(parsing: "RRULE:BYMINUTE=45;BYHOUR=17,5,17;INTERVAL=1;FREQ=DAILY")
        #expect(rule.description == "FREQ=DAILY;BYHOUR=5,17;BYMINUTE=45")
        #expect(rule.interval == 1 && rule.byHour == [5, 17])
    }

    @Test func aLargeCountIsAllowedWhereSlotsAreComputedArithmetically() throws {
        let rule = try RecurrenceRule(parsing: "FREQ=SECONDLY;COUNT=40000000")
        #expect(rule.count == 40_000_000)
    }
}
