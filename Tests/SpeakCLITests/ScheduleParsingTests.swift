import ArgumentParser
import Foundation
import SpeakAPI
import Testing

@testable import SpeakCLI

/// `speak schedule add|list|rm|show`, through the parser.
struct ScheduleParsingTests {
    func add(_ arguments: [String]) throws -> Speak.Schedule.Add {
        try #require(try Speak.parseAsRoot(["schedule", "add"] + arguments) as? Speak.Schedule.Add)
    }

    /// The body as the daemon reads it.
    func json(_ body: ScheduleBody) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: WireFormat.encoder().encode(body)) as? [String: Any])
    }

    /// The announcement is the body `speak` posts for the same options, not one built apart.
    @Test func announcementIsTheBodySpeakPosts() throws {
        let speech = [
            "--priority", "high", "--pitch", "1.2", "--lang", "pt-PT", "--to", "hall", "--chime", "none", "--repeat",
            "2", "--expires-after", "30", "--interrupt", "Doors", "closing",
        ]
        let add = try add(["--at", "2026-12-01T17:45:00+01:00"] + speech)
        let say = try #require(try Speak.parseAsRoot(speech) as? Speak.Say)
        let announcement = try add.announcement.readRequest()
        #expect(announcement == (try say.readRequest()))
        #expect(
            announcement.delivery.priority == .high && announcement.output == "hall" && !announcement.delivery.queue)
        #expect(announcement.utterance.text == "Doors closing")

        let body = try json(try add.body(announcement: announcement))
        #expect(Set(body.keys) == ["announcement", "at"], "\(body)")
        #expect(body["at"] as? String == "2026-12-01T17:45:00+01:00")
        let posted = try JSONSerialization.data(withJSONObject: try #require(body["announcement"]))
        #expect(try AnnouncementRequest.decode(json: posted) == announcement)
    }

    /// `--start` defaults to the start of the next minute and `--time-zone` to the machine's zone.
    @Test func ruleDefaultsStartAndZone() throws {
        let now = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse("2026-11-27T08:34:12.500Z")
        let lisbon = try #require(TimeZone(identifier: "Europe/Lisbon"))
        let rule = "FREQ=DAILY;BYHOUR=17;BYMINUTE=45"
        let add = try add(["--rrule", rule, "--name", "closing", "--missed", "120", "Closing", "time"])
        let body = try add.body(announcement: try add.announcement.readRequest(), now: now, zone: lisbon)
        #expect(body.rrule == rule && body.at == nil && body.name == "closing")
        #expect(body.start == "2026-11-27T08:35:00Z")
        #expect(body.timeZone == "Europe/Lisbon")
        let object = try json(body)
        #expect(object["missed"] as? [String: Int] == ["speakWithin": 120], "\(object)")

        let onTheMinute = try Date.ISO8601FormatStyle().parse("2026-11-27T08:34:00Z")
        #expect(
            try add.body(announcement: try add.announcement.readRequest(), now: onTheMinute).start
                == "2026-11-27T08:34:00Z")
        #expect(try add.body(announcement: try add.announcement.readRequest()).timeZone == TimeZone.current.identifier)

        let given = try self.add([
            "--rrule", rule, "--start", "2026-12-01T00:00:00+01:00", "--time-zone", "Europe/Berlin", "--missed", "skip",
            "x",
        ])
        let explicit = try given.body(announcement: try given.announcement.readRequest(), now: now, zone: lisbon)
        #expect(explicit.start == "2026-12-01T00:00:00+01:00" && explicit.timeZone == "Europe/Berlin")
        #expect(try json(explicit)["missed"] as? String == "skip")
        #expect(try json(explicit)["name"] == nil)
    }

    /// A `--json` body is scheduled as `speak --json` would post it.
    @Test func jsonBodyIsScheduled() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).json")
        try Data(#"{"spans":[{"text":"Next train to "},{"text":"Lisboa","language":"pt-PT"}]}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let add = try add(["--at", "2026-12-01T17:45:00Z", "--json", file.path, "--print-json"])
        #expect(add.printJSON)
        let request = try add.announcement.readRequest()
        #expect(request.utterance.spans.count == 2 && request.utterance.text == "Next train to Lisboa")
    }

    @Test(arguments: [
        (["schedule", "add", "hi"], "give --at TIME for one announcement or --rrule RULE"),
        (["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--rrule", "FREQ=DAILY", "hi"], "give one"),
        (
            ["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--start", "2026-12-01T00:00:00Z", "hi"],
            "--start goes with --rrule"
        ),
        (
            ["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--time-zone", "UTC", "hi"],
            "--time-zone goes with --rrule"
        ),
        (["schedule", "add", "--rrule", "FREQ=DAILY", "--missed", "0", "hi"], "--missed 0: give skip"),
        (["schedule", "add", "--rrule", "FREQ=DAILY", "--missed", "soon", "hi"], "--missed soon"),
        (["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--pitch", "3", "hi"], "--pitch 3"),
        (
            ["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--repeat-gap", "1", "hi"],
            "--repeat-gap needs --repeat N"
        ),
        (["schedule", "add", "--at", "2026-12-01T17:45:00Z", "--json", "-", "--ssml"], "--json and --ssml"),
        (["schedule", "rm"], "<ids>"),
        (["schedule", "show"], "<id>"),
        (["schedule", "list", "--http", "localhost"], "--http localhost"),
    ])
    func invalidScheduleInputNamesTheFlag(arguments: [String], expected: String) {
        expectRefused(arguments, naming: expected)
    }

    /// Daemon options stand before `schedule`, between it and its subcommand, or after.
    @Test func daemonOptionsAnywhere() throws {
        let socket = [SpeakEndpoint.unixSocket(path: "/tmp/s.sock")]
        for arguments in [
            ["--socket", "/tmp/s.sock", "schedule", "list"], ["schedule", "list", "--socket", "/tmp/s.sock"],
        ] {
            let list = try #require(try Speak.parseAsRoot(arguments) as? Speak.Schedule.List, "\(arguments)")
            #expect(try list.connection.candidates(environment: [:]) == socket)
        }
        let remove = try #require(
            try Speak.parseAsRoot(["--socket", "/tmp/s.sock", "schedule", "rm", "a1", "b2"]) as? Speak.Schedule.Remove)
        #expect(remove.ids == ["a1", "b2"])
        #expect(try remove.connection.candidates(environment: [:]) == socket)
        let show = try #require(try Speak.parseAsRoot(["schedule", "show", "a1"]) as? Speak.Schedule.Show)
        #expect(show.id == "a1")
        let list = try #require(try Speak.parseAsRoot(["schedule", "list", "--json"]) as? Speak.Schedule.List)
        #expect(list.json)
    }

    /// The table has a heading and one row per schedule, the columns lined up and the text cut short.
    @Test func listTable() throws {
        let json = """
            {"schedules":[
              {"announcement":{"priority":"default","queue":true,"text":"Doors closing"},"at":"2026-12-01T16:45:00Z",
               "created":"2026-11-27T08:34:12.710Z","id":"obqtm4j6dn76","lastSlot":null,"missed":"skip",
               "next":"2026-12-01T16:45:00.000Z","updated":"2026-11-27T08:34:12.710Z"},
              {"announcement":{"language":"pt-PT","priority":"default","queue":true,
               "text":"A loja fecha às dezoito horas, por favor dirijam-se às caixas"},"created":"2026-11-27T08:34:12.710Z",
               "id":"tz5rbsaadv6w","lastSlot":null,"missed":{"speakWithin":60},"name":"closing","next":null,
               "rrule":"FREQ=DAILY;BYHOUR=17;BYMINUTE=45","start":"2026-11-27T08:35:00Z","timeZone":"Europe/Lisbon",
               "updated":"2026-11-27T08:34:12.710Z"}
            ]}
            """
        let schedules = try WireFormat.decoder().decode(ScheduleSummary.List.self, from: Data(json.utf8)).schedules
        let lines = Speak.Schedule.List.table(schedules).split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("ID            NAME     NEXT "), "\(lines[0])")
        #expect(lines[1].hasPrefix("obqtm4j6dn76  -        2026-12-01T16:45:00.000Z  at 2026-12-01T16:45:00Z "))
        #expect(lines[1].hasSuffix("  Doors closing"))
        #expect(lines[2].contains("  closing  none  "), "\(lines[2])")
        #expect(lines[2].contains("FREQ=DAILY;BYHOUR=17;BYMINUTE=45 in Europe/Lisbon"))
        #expect(lines[2].hasSuffix("A loja fecha às dezoito horas, por favo…"), "\(lines[2])")
        #expect(
            lines.allSatisfy { $0.dropFirst(12).hasPrefix("  ") && !$0.dropFirst(14).hasPrefix(" ") },
            "the name column is not lined up: \(lines)")
    }

    @Test func helpNamesTheDefaults() {
        let root = Speak.helpMessage()
        #expect(root.contains("schedule") && root.contains("audit"))
        let schedule = Speak.helpMessage(for: Speak.Schedule.self)
        for subcommand in ["add", "list", "rm", "show"] {
            #expect(schedule.contains("\n  \(subcommand) "), "schedule help lacks \(subcommand)")
        }
        let add = Speak.helpMessage(for: Speak.Schedule.Add.self, columns: 200)
        for flag in [
            "--at", "--rrule", "--start", "--time-zone", "--missed", "--name", "--print-json", "--socket", "--pitch",
        ] {
            #expect(add.contains(flag), "schedule add help lacks \(flag)")
        }
        #expect(add.contains("default: this machine's zone, \(TimeZone.current.identifier)"), "\(add)")
        #expect(add.contains("start of the next minute"), "\(add)")
    }
}
