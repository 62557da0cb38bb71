import Foundation
import SpeakSchedules
import Testing

/// The body of POST /v1/schedules and its PATCH: what is refused, naming which field, and what
/// is given back.
@Suite("Schedule definition")
struct ScheduleDefinitionTests {
    private static func refusal(_ body: String) -> ScheduleError? {
        do {
            _ = try ScheduleDefinition(json: Data(body.utf8))
            return nil
        } catch {
            return error
        }
    }

    private static let announcement = #""announcement": {"text": "Closing soon"}"#

    @Test(arguments: [
        (
            #"{\#(announcement), "rrule": "FREQ=DAILY", "start": "2026-12-01T00:00:00Z", "timeZone": "Mars/Olympus"}"#,
            "timeZone: no time zone called 'Mars/Olympus'"
        ),
        (
            #"{\#(announcement), "rrule": "FREQ=DAILY", "timeZone": "Europe/Lisbon"}"#,
            "start: is required with 'rrule': when the rule begins, e.g. 2026-12-01T00:00:00+01:00"
        ),
        (
            #"{\#(announcement), "rrule": "FREQ=DAILY", "start": "2026-12-01T00:00:00Z"}"#,
            "timeZone: is required with 'rrule': the zone its times are in, e.g. Europe/Lisbon"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "rrule": "FREQ=DAILY"}"#,
            "at: give either 'at' or 'rrule', not both (to switch in a PATCH, set the other one to null)"
        ),
        (
            #"{\#(announcement)}"#,
            "at: give 'at' for one announcement or 'rrule' with 'start' and 'timeZone' for a recurring one"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "repeat": 3}"#,
            "repeat: unknown field 'repeat' (a schedule has announcement, at, missed, name, paused, rrule, start, timeZone)"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00"}"#,
            "at: '2026-12-01T17:45:00' is not an RFC 3339 time with an offset or Z, e.g. 2026-12-01T17:45:00+01:00 or 2026-12-01T16:45:00Z"
        ),
        (
            #"{\#(announcement), "at": 1764611100}"#,
            "at: must be an RFC 3339 time with an offset, e.g. 2026-12-01T17:45:00+01:00 or 2026-12-01T16:45:00Z"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "start": "2026-12-01T17:45:00Z"}"#,
            "start: only goes with 'rrule'; 'at' is already a full time"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "timeZone": "Europe/Lisbon"}"#,
            "timeZone: only goes with 'rrule'; 'at' is already a full time"
        ),
        (
            #"{\#(announcement), "rrule": "FREQ=DAILY;BYWEEKNO=1", "start": "2026-12-01T00:00:00Z", "timeZone": "UTC"}"#,
            "rrule: unknown part 'BYWEEKNO' (speakd knows FREQ, INTERVAL, BYDAY, BYHOUR, BYMINUTE, BYSECOND, COUNT, UNTIL)"
        ),
        (
            #"{\#(announcement), "rrule": 7, "start": "2026-12-01T00:00:00Z", "timeZone": "UTC"}"#,
            "rrule: must be a string such as FREQ=DAILY;BYHOUR=17;BYMINUTE=45"
        ),
        (
            #"{\#(announcement), "rrule": "FREQ=DAILY", "start": "2026-12-01T00:00:00Z", "timeZone": 1}"#,
            "timeZone: must be a string naming a zone, e.g. Europe/Lisbon"
        ),
        (
            #"{"announcement": "Closing soon", "at": "2026-12-01T17:45:00Z"}"#,
            "announcement: must be a JSON object (the announcement to speak)"
        ),
        (#"{"at": "2026-12-01T17:45:00Z"}"#, "announcement: is required: the announcement to speak, as a JSON object"),
        (#"{\#(announcement), "at": "2026-12-01T17:45:00Z", "name": 5}"#, "name: must be a string"),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "name": "\#(String(repeating: "x", count: 201))"}"#,
            "name: is 201 characters; at most 200"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": "burst"}"#,
            #"missed: 'burst' is not known; must be "skip" or {"speakWithin": seconds}"#
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": 0}}"#,
            "missed: speakWithin must be a whole number of seconds from 1 to 86400"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": 86401}}"#,
            "missed: speakWithin must be a whole number of seconds from 1 to 86400"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": 1.5}}"#,
            "missed: speakWithin must be a whole number of seconds from 1 to 86400"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": true}}"#,
            "missed: speakWithin must be a whole number of seconds from 1 to 86400"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": 60, "burst": 1}}"#,
            #"missed: has an unknown key 'burst'; must be "skip" or {"speakWithin": seconds}"#
        ),
        (#"{\#(announcement), "at": "2026-12-01T17:45:00Z", "paused": "true"}"#, "paused: must be true or false"),
        (#"{\#(announcement), "at": "2026-12-01T17:45:00Z", "paused": 1}"#, "paused: must be true or false"),
        (#"{\#(announcement), "at": "2026-12-01T17:45:00Z", "paused": {}}"#, "paused: must be true or false"),
    ])
    func refusedBodiesNameTheirField(_ body: String, _ expected: String) throws {
        let error = try #require(Self.refusal(body))
        #expect(error.description == expected)
        #expect(!error.isMalformed && !error.hasNoFutureSlot)
    }

    @Test(arguments: ["", "[1]", "\"at\"", "{\"announcement\": {}", "null"])
    func aBodyThatIsNotAnObjectIsMalformed(_ body: String) throws {
        let error = try #require(Self.refusal(body))
        #expect(error.isMalformed)
        #expect(error.field == "body")
    }

    @Test(arguments: [
        (
            #"{"announcement": {"text": "Code 4711", "private": true, "private": false}, "at": "2026-12-01T17:45:00Z"}"#,
            "announcement.private"
        ),
        (#"{\#(announcement), "at": "2026-12-01T17:45:00Z", "at": "2026-12-02T17:45:00Z"}"#, "at"),
        (
            #"{"announcement": {"spans": [{"text": "a", "pitch": 1, "pitch": 2}]}, "at": "2026-12-01T17:45:00Z"}"#,
            "announcement.spans[0].pitch"
        ),
        (
            #"{\#(announcement), "at": "2026-12-01T17:45:00Z", "missed": {"speakWithin": 5, "speakWithin": 6}}"#,
            "missed.speakWithin"
        ),
    ])
    func aKeyGivenTwiceAtAnyDepthIsMalformedNamingIt(_ body: String, _ field: String) throws {
        let error = try #require(Self.refusal(body))
        #expect(error.isMalformed)
        #expect(error.field == field)
        #expect(error.message == "duplicate key; a key may appear only once in an object")
        let patch = try ScheduleDefinition(json: Data(Self.once.utf8))
        do {
            _ = try patch.merging(patch: Data(body.utf8))
            Issue.record("a patch with a key given twice was accepted: \(body)")
        } catch {
            #expect(error.isMalformed && error.field == field)
        }
    }

    @Test func theAnnouncementIsDecodedAsAnAnnouncementBodyIs() throws {
        let definition = try ScheduleDefinition(
            json: Data(#"{"announcement": {"text": "Doors", "priority": "high"}, "at": "2026-12-01T17:45:00Z"}"#.utf8))
        #expect(definition.request.delivery.priority == .high)
        #expect(definition.request.utterance.text == "Doors")
        let cases = [
            (#"{"text": "a", "pich": 1}"#, "announcement.pich", "malformed"),
            (#"{"text": "a", "priority": "urgent"}"#, "announcement.priority", "malformed"),
            (#"{"text": "a", "rate": 1e400}"#, "announcement.rate", "outOfRange"),
            (#"{"text": "a", "expiresAfter": "soon"}"#, "announcement.expiresAfter", "malformed"),
        ]
        for (announcement, field, code) in cases {
            let error = try #require(Self.refusal(#"{"announcement": \#(announcement), "at": "2026-12-01T17:45:00Z"}"#))
            #expect(error.field == field, "\(announcement): \(error)")
            #expect(error.announcementCode == code, "\(announcement): \(error)")
            #expect(!error.isMalformed)
        }
    }

    /// Only IANA names with a zone file: Foundation also makes zones of offsets and of a name
    /// with a NUL byte after it.
    @Test(arguments: [
        "UTC\u{0000}", "GMT+01:00", "UTC+5", "+01:00", "../../../etc/passwd", "Europe/../Europe/Lisbon",
        "/Europe/Lisbon", "Europe//Lisbon", "Europe/Lisbon/", "zone.tab", "localtime", "posix/Europe/Lisbon", "Europe",
        "", "Europe/Lisbon\n",
    ])
    func aZoneThatIsNotAnIANANameIsRefused(_ zone: String) throws {
        let encoded = String(decoding: try JSONEncoder().encode(zone), as: UTF8.self)
        let error = try #require(
            Self.refusal(
                #"{\#(Self.announcement), "rrule": "FREQ=DAILY", "start": "2026-12-01T00:00:00Z", "timeZone": \#(encoded)}"#
            ), "\(zone) was accepted")
        #expect(error.field == "timeZone")
        #expect(!error.isMalformed)
    }

    @Test(arguments: ["UTC", "Europe/Lisbon", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "America/Port-au-Prince"])
    func anIANANameIsTaken(_ zone: String) throws {
        let definition = try recurring("FREQ=DAILY", start: "2026-12-01T00:00:00Z", zone: zone)
        guard case .recurring(_, _, let taken) = definition.timing else {
            Issue.record("not recurring: \(definition.timing)")
            return
        }
        #expect(taken == TimeZone(identifier: zone))
    }

    @Test func anUnknownKeyIsRefusedAsSuch() throws {
        let error = try #require(Self.refusal(#"{\#(Self.announcement), "at": "2026-12-01T17:45:00Z", "When": 1}"#))
        #expect(error.isUnknownField)
        #expect(error.field == "When")
    }

    @Test func aOneTimeBodyDecodes() throws {
        let body =
            #"{"announcement": {"text": "Doors close", "priority": "high"}, "at": "2026-12-01T17:45:00.250+01:00", "name": "Doors"}"#
        let definition = try ScheduleDefinition(json: Data(body.utf8))
        #expect(definition.timing == .once(at: instant("2026-12-01T16:45:00Z").addingTimeInterval(0.25)))
        #expect(definition.name == "Doors")
        #expect(definition.missed == .skip)
        #expect(
            String(decoding: definition.announcement, as: UTF8.self) == #"{"priority":"high","text":"Doors close"}"#)
    }

    @Test func aRecurringBodyDecodes() throws {
        let definition = try recurring(
            "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", start: "2026-12-01T00:00:00+01:00", zone: "Europe/Lisbon",
            missed: #"{"speakWithin": 600}"#)
        guard case .recurring(let rule, let start, let zone) = definition.timing else {
            Issue.record("not recurring: \(definition.timing)")
            return
        }
        #expect(rule.description == "FREQ=DAILY;BYHOUR=17;BYMINUTE=45")
        #expect(start == instant("2026-11-30T23:00:00Z"))
        #expect(zone.identifier == "Europe/Lisbon")
        #expect(definition.missed == .speakWithin(seconds: 600))
    }

    @Test func encodedIsCanonicalAndReadsBack() throws {
        let definition = try recurring(
            "BYMINUTE=45;FREQ=DAILY;BYHOUR=17", start: "2026-07-01T00:00:00+00:00", zone: "Europe/Lisbon",
            missed: #"{"speakWithin": 600}"#)
        let text = String(decoding: definition.encoded(), as: UTF8.self)
        #expect(
            text
                == #"{"announcement":{"text":"Closing soon"},"missed":{"speakWithin":600},"paused":false,"rrule":"FREQ=DAILY;BYHOUR=17;BYMINUTE=45","start":"2026-07-01T01:00:00+01:00","timeZone":"Europe/Lisbon"}"#
        )
        #expect(try ScheduleDefinition(json: definition.encoded()) == definition)

        let once = try ScheduleDefinition(
            json: Data(
                #"{"announcement": {"text": "a/b"}, "at": "2026-12-01T17:45:00.5-05:00", "name": "Ünïcode"}"#.utf8))
        #expect(
            String(decoding: once.encoded(), as: UTF8.self)
                == #"{"announcement":{"text":"a/b"},"at":"2026-12-01T22:45:00.5Z","missed":"skip","name":"Ünïcode","paused":false}"#
        )
        #expect(try ScheduleDefinition(json: once.encoded()) == once)
    }

    @Test func checkRefusesAnAtInThePast() throws {
        let definition = try ScheduleDefinition(
            json: Data(#"{\#(Self.announcement), "at": "2026-12-01T17:45:00Z"}"#.utf8))
        #expect(throws: Never.self) { try definition.check(now: instant("2026-12-01T17:45:00Z")) }
        do {
            try definition.check(now: instant("2026-12-01T17:45:01Z"))
            Issue.record("a past at was accepted")
        } catch {
            #expect(error.field == "at")
            #expect(error.hasNoFutureSlot)
            #expect(error.message == "2026-12-01T17:45:00Z is in the past (it is now 2026-12-01T17:45:01Z)")
        }
    }

    @Test func checkRefusesAnExhaustedRule() throws {
        let counted = try recurring("FREQ=DAILY;COUNT=2", start: "2026-01-01T09:00:00Z", zone: "UTC")
        #expect(throws: Never.self) { try counted.check(now: instant("2026-01-02T09:00:00Z")) }
        let until = try recurring("FREQ=DAILY;UNTIL=20260105", start: "2026-01-01T09:00:00Z", zone: "UTC")
        #expect(throws: Never.self) { try until.check(now: instant("2026-01-05T08:00:00Z")) }
        let never = try recurring("FREQ=DAILY;INTERVAL=7;BYDAY=MO", start: "2026-01-06T09:00:00Z", zone: "UTC")
        for (definition, now) in [
            (counted, "2026-01-02T09:00:01Z"), (until, "2026-01-05T09:00:01Z"), (never, "2026-01-01T00:00:00Z"),
        ] {
            do {
                try definition.check(now: instant(now))
                Issue.record("an exhausted rule was accepted at \(now)")
            } catch {
                #expect(error.field == "rrule")
                #expect(error.hasNoFutureSlot)
            }
        }
    }

    // MARK: PATCH

    private static let once =
        #"{"announcement": {"text": "Doors close"}, "at": "2026-12-01T17:45:00Z", "name": "Doors"}"#

    @Test func aPatchReplacesPresentKeysAndNullRemovesThem() throws {
        let definition = try ScheduleDefinition(json: Data(Self.once.utf8))
        let renamed = try definition.merging(
            patch: Data(#"{"name": "Front doors", "missed": {"speakWithin": 60}}"#.utf8))
        #expect(renamed.name == "Front doors")
        #expect(renamed.missed == .speakWithin(seconds: 60))
        #expect(renamed.timing == definition.timing)
        #expect(renamed.announcement == definition.announcement)

        let unnamed = try renamed.merging(patch: Data(#"{"name": null, "missed": null}"#.utf8))
        #expect(unnamed.name == nil)
        #expect(unnamed.missed == .skip)

        let reworded = try definition.merging(patch: Data(#"{"announcement": {"ssml": "<speak>Bye</speak>"}}"#.utf8))
        #expect(String(decoding: reworded.announcement, as: UTF8.self) == #"{"ssml":"<speak>Bye</speak>"}"#)
    }

    @Test func pausedIsFalseUnlessGivenAndSurvivesTheStoredForm() throws {
        let definition = try ScheduleDefinition(json: Data(Self.once.utf8))
        #expect(!definition.paused && !definition.plan.paused)
        let paused = try definition.merging(patch: Data(#"{"paused": true}"#.utf8))
        #expect(paused.paused && paused.plan.paused)
        #expect(paused.timing == definition.timing && paused.name == definition.name)
        #expect(String(decoding: paused.encoded(), as: UTF8.self).contains(#""paused":true"#))
        #expect(try ScheduleDefinition(json: paused.encoded()) == paused)
        // The daemon's plan is read from the stored form without its announcement.
        var stored = try #require(try JSONSerialization.jsonObject(with: paused.encoded()) as? [String: Any])
        stored["announcement"] = nil
        let plan = try SchedulePlan(json: try JSONSerialization.data(withJSONObject: stored))
        #expect(plan == paused.plan)
        #expect(try definition.merging(patch: Data(#"{"paused": null}"#.utf8)).paused == false)
        #expect(try paused.merging(patch: Data(#"{"paused": false}"#.utf8)) == definition)
    }

    @Test func switchingFromAtToRruleNeedsAtRemoved() throws {
        let definition = try ScheduleDefinition(json: Data(Self.once.utf8))
        let toRule = #""rrule": "FREQ=DAILY;BYHOUR=9", "start": "2026-12-01T00:00:00Z", "timeZone": "Europe/Berlin""#
        do {
            _ = try definition.merging(patch: Data("{\(toRule)}".utf8))
            Issue.record("at and rrule together were accepted")
        } catch {
            #expect(error.field == "at")
        }
        let switched = try definition.merging(patch: Data(#"{"at": null, \#(toRule)}"#.utf8))
        guard case .recurring(let rule, _, let zone) = switched.timing else {
            Issue.record("not recurring: \(switched.timing)")
            return
        }
        #expect(rule.byHour == [9])
        #expect(zone.identifier == "Europe/Berlin")
        #expect(switched.name == "Doors")

        // And back: the rule's companions must go too.
        do {
            _ = try switched.merging(patch: Data(#"{"rrule": null, "at": "2026-12-24T12:00:00Z"}"#.utf8))
            Issue.record("start and timeZone next to at were accepted")
        } catch {
            #expect(error.field == "start")
        }
        let back = try switched.merging(
            patch: Data(#"{"rrule": null, "start": null, "timeZone": null, "at": "2026-12-24T12:00:00Z"}"#.utf8))
        #expect(back.timing == .once(at: instant("2026-12-24T12:00:00Z")))
    }

    @Test func aPatchIsAsStrictAsABody() throws {
        let definition = try ScheduleDefinition(json: Data(Self.once.utf8))
        let cases: [(String, String)] = [
            (#"{"nmae": "x"}"#, "nmae"), (#"{"at": "tomorrow"}"#, "at"), (#"{"announcement": null}"#, "announcement"),
            (#"{"name": ["x"]}"#, "name"), (#"{"missed": "sometimes"}"#, "missed"), ("[]", "body"),
            (#"{"paused": "yes"}"#, "paused"),
        ]
        for (patch, field) in cases {
            do {
                _ = try definition.merging(patch: Data(patch.utf8))
                Issue.record("\(patch) was accepted")
            } catch {
                #expect(error.field == field, "\(patch): \(error)")
            }
        }
    }
}
