import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient

extension Speak {
    /// `speak schedule add|list|rm|show`: announcements the daemon makes by itself, once or on a rule.
    struct Schedule: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Schedule announcements (once, or on an RFC 5545 rule); list, show and remove them.",
            discussion: """
                The daemon keeps its schedules in its state directory: start speakd with --state-dir \
                (the system and user units do). See docs/cli.md.
                """,
            subcommands: [Add.self, List.self, Remove.self, Show.self])
    }
}

extension Speak.Schedule {
    /// `speak schedule add [speech options…] (--at TIME | --rrule RULE …) TEXT`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Schedule an announcement: once at --at, or at every slot of --rrule.",
            discussion: """
                The announcement takes the options 'speak' takes for one (its voice, priority, output, \
                chime, --json body); it is checked when the schedule is made and spoken as if posted at \
                each slot. Prints the schedule's id and its next slot.

                Examples:
                  speak schedule add --at 2026-12-24T17:45:00Z "We close at six"
                  speak schedule add --rrule 'FREQ=DAILY;BYHOUR=17;BYMINUTE=45' \\
                    --time-zone Europe/Lisbon --name closing --lang pt-PT \\
                    "A loja fecha às dezoito horas"
                """)

        @Option(
            help: ArgumentHelp(
                "Speak it once at TIME: RFC 3339 with an offset or Z, e.g. 2026-12-01T17:45:00+01:00.",
                valueName: "time"))
        var at: String?

        @Option(
            help: ArgumentHelp(
                "Speak it at every slot of an RFC 5545 rule, e.g. 'FREQ=DAILY;BYHOUR=17;BYMINUTE=45'.",
                valueName: "rule"))
        var rrule: String?

        @Option(
            help: ArgumentHelp(
                "With --rrule: when the rule begins, RFC 3339 (default: now, at the start of the next minute, "
                    + "so slots the rule leaves unnamed fall on whole minutes).",
                valueName: "time"))
        var start: String?

        @Option(
            help: ArgumentHelp(
                "With --rrule: the IANA zone its times are in, e.g. Europe/Lisbon (default: this machine's zone, "
                    + "\(TimeZone.current.identifier)).",
                valueName: "zone"))
        var timeZone: String?

        @Option(
            help: ArgumentHelp(
                "A slot missed while speakd was down: skip it (the default), or speak the latest one when it is "
                    + "at most SECONDS late.",
                valueName: "skip|seconds"))
        var missed: String?

        @Option(help: ArgumentHelp("A name for it, shown by 'speak schedule list'.", valueName: "name"))
        var name: String?

        @Flag(help: "Print the schedule as JSON, as 'speak schedule show' does, instead of its id and next slot.")
        var printJSON = false

        /// What to say and how, as `speak` takes it.
        @OptionGroup var announcement: AnnouncementOptions

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        func validate() throws {
            switch (at, rrule) {
            case (nil, nil): throw ValidationError("give --at TIME for one announcement or --rrule RULE for many")
            case (_?, _?): throw ValidationError("--at and --rrule are two kinds of schedule; give one")
            default: break
            }
            if at != nil {
                for (flag, given) in [("--start", start != nil), ("--time-zone", timeZone != nil)] where given {
                    throw ValidationError("\(flag) goes with --rrule; --at is already a full time")
                }
            }
            _ = try missedPolicy()
        }

        /// What `--missed` asks for; nil when it is not given (the daemon's default, skip).
        func missedPolicy() throws -> ScheduleBody.Missed? {
            guard let missed else { return nil }
            if missed == "skip" { return .skip }
            guard let seconds = Int(missed), seconds >= 1 else {
                throw ValidationError("--missed \(missed): give skip, or a whole number of seconds from 1")
            }
            return .speakWithin(seconds: seconds)
        }

        /// The `POST /v1/schedules` body for `announcement`; `--start` and `--time-zone` default
        /// to the minute after `now` and to `zone`.
        func body(
            announcement: AnnouncementRequest, now: Date = Date(), zone: TimeZone = .current
        ) throws -> ScheduleBody {
            var body = ScheduleBody(announcement: announcement, missed: try missedPolicy(), name: name)
            if let at {
                body.at = at
            } else {
                let minute = (now.timeIntervalSince1970 / 60).rounded(.up) * 60
                body.rrule = rrule
                body.start = start ?? Date(timeIntervalSince1970: minute).formatted(Date.ISO8601FormatStyle())
                body.timeZone = timeZone ?? zone.identifier
            }
            return body
        }

        func run() async throws {
            let body = try body(announcement: try announcement.readRequest())
            let client = try await connection.requireDaemon()
            let response = try await client.send("POST", "/v1/schedules", json: body)
            try response.checkStatus("schedule add")
            if printJSON {
                print(String(decoding: response.body, as: UTF8.self))
                return
            }
            let schedule = try response.decode(ScheduleSummary.self)
            print("\(schedule.id) next \(schedule.next ?? "none")")
        }
    }

    /// `speak schedule list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the schedules, oldest first: id, name, next slot, rule or time, and text.")

        @Flag(help: "Print the daemon's JSON, {\"schedules\": [...]}, instead of the table.")
        var json = false

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        func run() async throws {
            let client = try await connection.requireDaemon()
            // The daemon keeps at most 1,000 by default: one page, unless it was told to keep more.
            let response = try await client.send("GET", "/v1/schedules?limit=1000")
            try response.checkStatus("schedule list")
            if json {
                print(String(decoding: response.body, as: UTF8.self))
                return
            }
            var page = try response.decode(ScheduleSummary.List.self)
            var schedules = page.schedules
            while let next = page.next {
                let more = try await client.send(
                    "GET", "/v1/schedules?limit=1000&after=\(Speak.Cancel.escapePath(next))")
                try more.checkStatus("schedule list")
                page = try more.decode(ScheduleSummary.List.self)
                schedules += page.schedules
            }
            print(schedules.isEmpty ? "no schedules" : Self.table(schedules))
        }

        /// The schedules as a table with a heading, its columns padded to their widest cell.
        static func table(_ schedules: [ScheduleSummary]) -> String {
            let rows =
                [["ID", "NAME", "NEXT", "WHEN", "TEXT"]]
                + schedules.map { schedule in
                    let when =
                        schedule.rrule.map { "\($0) in \(schedule.timeZone ?? "?")" }
                        ?? schedule.at.map { "at \($0)" } ?? "-"
                    return [
                        schedule.id, schedule.name ?? "-", schedule.next ?? "none", when,
                        Speak.Audit.excerpt(schedule.text ?? ""),
                    ]
                }
            let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
            return rows.map { row in
                var line = ""
                for (column, cell) in row.enumerated() {
                    let last = column == row.count - 1
                    line += last ? cell : cell.padding(toLength: widths[column] + 2, withPad: " ", startingAt: 0)
                }
                return line
            }.joined(separator: "\n")
        }
    }

    /// `speak schedule rm ID…`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove schedules; their slots still to come are not spoken.")

        @Argument(help: "The schedules' ids, as 'speak schedule list' shows them.")
        var ids: [String]

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        /// Removes each; one that fails does not stop the others, and the last failure is the exit status.
        func run() async throws {
            let client = try await connection.requireDaemon()
            var failures: [SpeakFailure] = []
            for id in ids {
                let response = try await client.send("DELETE", "/v1/schedules/\(Speak.Cancel.escapePath(id))")
                do {
                    try response.checkStatus("schedule rm \(id)")
                    print("\(id) removed")
                } catch let failure as SpeakFailure {
                    failures.append(failure)
                }
            }
            guard let last = failures.popLast() else { return }
            for failure in failures { printError("speak: \(failure.message)") }
            throw last
        }
    }

    /// `speak schedule show ID`.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a schedule as JSON: its definition, its last slot and its next one.")

        @Argument(help: "The schedule's id.")
        var id: String

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        func run() async throws {
            let client = try await connection.requireDaemon()
            try await client.send("GET", "/v1/schedules/\(Speak.Cancel.escapePath(id))")
                .printBody(orFailWith: "schedule show")
        }
    }
}

/// The body of `POST /v1/schedules`: the announcement, and `at`, or `rrule` from `start` in `timeZone`.
struct ScheduleBody: Encodable, Equatable {
    /// What the daemon does with a slot that passed while it was down.
    enum Missed: Encodable, Equatable {
        case skip
        case speakWithin(seconds: Int)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .skip:
                var container = encoder.singleValueContainer()
                try container.encode("skip")
            case .speakWithin(let seconds):
                try ["speakWithin": seconds].encode(to: encoder)
            }
        }
    }

    var announcement: AnnouncementRequest
    var at: String?
    var rrule: String?
    var start: String?
    var timeZone: String?
    var missed: Missed?
    var name: String?
}

/// The fields of a schedule, as the daemon answers it, that `speak` prints.
struct ScheduleSummary: Decodable {
    /// `GET /v1/schedules`.
    struct List: Decodable {
        var schedules: [ScheduleSummary]
        /// The cursor of the next page, when there is one.
        var next: String?
    }

    var id: String
    var name: String?
    var at: String?
    var rrule: String?
    var timeZone: String?
    /// The next slot; nil when none is left.
    var next: String?
    /// The announcement's text; nil when its body is not one this `speak` reads.
    var text: String?

    private enum CodingKeys: String, CodingKey {
        case id, name, at, rrule, timeZone, next, announcement
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        name = try container.decodeIfPresent(String.self, forKey: .name)
        at = try container.decodeIfPresent(String.self, forKey: .at)
        rrule = try container.decodeIfPresent(String.self, forKey: .rrule)
        timeZone = try container.decodeIfPresent(String.self, forKey: .timeZone)
        next = try container.decodeIfPresent(String.self, forKey: .next)
        // A newer daemon's announcement may have keys this one does not know; the table goes on without its text.
        text = (try? container.decode(AnnouncementRequest.self, forKey: .announcement))?.utterance.text
    }
}
