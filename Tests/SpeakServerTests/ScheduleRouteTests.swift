import AnnouncementIntake
import AnnouncementQueue
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IntakeTestSupport
import Logging
import ServiceCore
import SpeakAPI
import SpeakScheduler
import SpeakServer
import SpeakService
import SpeakState
import SpeakTestSupport
import Testing

/// `/v1/schedules` over a real database in a temporary directory, through the router.
@Suite("Schedule routes", .timeLimit(.minutes(1)))
struct ScheduleRouteTests {
    /// A server whose schedules live in a fresh state directory.
    struct Setup {
        let running = RunningQueue()
        let directory: URL
        let database: StateDatabase
        let server: SpeakServer
        let schedules: ScheduleService
        let intake: AnnouncementIntake

        init(
            limits: ScheduleService.Limits = ScheduleService.Limits(),
            now: @escaping @Sendable () -> Date = { Date() }
        ) throws {
            directory = try temporaryDirectory()
            database = try StateDatabase(directory: directory.path)
            let intake = AnnouncementIntake(
                outputs: AnnouncementOutputs(single: running.queue), renderer: FakeRenderer.tone(),
                health: SwitchableHealth())
            var service = CoreService(intake: intake)
            schedules = ScheduleService(
                store: database.schedules, intake: intake, logger: Logger(label: "test"), now: now, limits: limits)
            service.scheduleService = schedules
            self.intake = intake
            self.server = SpeakServer(service: service)
        }

        func test(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
            defer { try? FileManager.default.removeItem(at: directory) }
            try await running.waitUntilRunning()
            do {
                try await Application(router: server.buildRouter()).test(.router) { client in
                    try await body(JSONClient(base: client))
                }
            } catch {
                await running.shutdown()
                throw error
            }
            await running.shutdown()
        }
    }

    static func future(_ seconds: Double = 3_600) -> String {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + seconds).rounded(.up))
            .formatted(Date.ISO8601FormatStyle())
    }

    static func error(_ response: TestResponse) throws -> ErrorResponse.Detail {
        try decode(ErrorResponse.self, response).error
    }

    @Test("A key given twice anywhere in a schedule body is 400 naming it, as for POST /v1/announcements")
    func duplicateKeysAreRefused() async throws {
        let at = Self.future()
        try await Setup().test { client in
            let announcement = #"{"text": "Your code is 4711", "private": true, "private": false}"#
            let posted = try await client.execute(
                uri: "/v1/announcements", method: .post, body: jsonBody(announcement))
            #expect(posted.status == .badRequest)
            let direct = try Self.error(posted)

            let scheduled = try await client.execute(
                uri: "/v1/schedules", method: .post,
                body: jsonBody(#"{"announcement": \#(announcement), "at": "\#(at)"}"#))
            #expect(scheduled.status == .badRequest)
            let refusal = try Self.error(scheduled)
            #expect(refusal.field == "announcement.private")
            #expect(refusal.code == direct.code && refusal.message == direct.message)
            let listed = try await client.execute(uri: "/v1/schedules", method: .get)
            #expect(String(buffer: listed.body).contains(#""schedules":[]"#))

            for body in [
                #"{"announcement": {"text": "a"}, "at": "\#(at)", "at": "\#(Self.future(7_200))"}"#,
                #"{"announcement": {"text": "a"}, "at": "\#(at)", "missed": {"speakWithin": 5, "speakWithin": 6}}"#,
                #"{"announcement": {"spans": [{"text": "a", "pitch": 1, "pitch": 2}]}, "at": "\#(at)"}"#,
            ] {
                let response = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(
                    try Self.error(response).message == "duplicate key; a key may appear only once in an object",
                    "\(body)")
            }

            let created = try await client.execute(
                uri: "/v1/schedules", method: .post,
                body: jsonBody(#"{"announcement": {"text": "Doors close"}, "at": "\#(at)"}"#))
            #expect(created.status == .created)
            let id = try #require(created.headers[.location]).split(separator: "/").last.map(String.init) ?? ""
            let patched = try await client.execute(
                uri: "/v1/schedules/\(id)", method: .patch,
                headers: [.contentType: "application/merge-patch+json"],
                body: jsonBody(#"{"announcement": {"text": "Doors close", "private": true, "private": false}}"#))
            #expect(patched.status == .badRequest)
            #expect(try Self.error(patched).field == "announcement.private")
            let shown = try await client.execute(uri: "/v1/schedules/\(id)", method: .get)
            #expect(String(buffer: shown.body).contains(#""announcement":{"text":"Doors close"}"#))
        }
    }

    @Test("A slot from before the schedule was made is not missed: no skipped event, no lastSlot, the next one ahead")
    func slotsBeforeTheScheduleAreNotMissed() async throws {
        let setup = try Setup()
        let events = setup.intake.outputs.events()
        let runner = Task { try await setup.schedules.run() }
        defer { runner.cancel() }
        try await setup.test { client in
            // Hourly from a minute ago: its first slot passed before the schedule existed.
            let body = #"""
                {"announcement": {"text": "The museum closes in one hour"}, "rrule": "FREQ=HOURLY",
                 "start": "\#(Self.future(-60))", "timeZone": "UTC"}
                """#
            let created = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(body))
            #expect(created.status == .created)
            let id = try #require(created.headers[.location]).split(separator: "/").last.map(String.init) ?? ""
            let changes = Task {
                var seen: [ScheduleChange] = []
                for await sequenced in events where sequenced.event.id == id {
                    if let change = sequenced.event.schedule { seen.append(change) }
                }
                return seen
            }
            // The runner acts on a new schedule at once; a second is ample for a skip to be sent.
            try await Task.sleep(for: .seconds(1))
            changes.cancel()
            let seen = await changes.value
            #expect(seen.map(\.change) == [.created], "\(seen)")
            let shown = try await client.execute(uri: "/v1/schedules/\(id)", method: .get)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(buffer: shown.body)) as? [String: Any])
            #expect(object["lastSlot"] is NSNull, "\(object)")
            let next = try #require(object["next"] as? String)
            let nextDate = try Date.ISO8601FormatStyle().parse(next)
            #expect(nextDate > Date(), "next \(next)")
        }
    }

    @Test("paused: false by default, set by POST and PATCH, strict; a paused schedule's slots pass unspoken")
    func pausedSchedules() async throws {
        let setup = try Setup()
        let events = setup.intake.outputs.events()
        let runner = Task { try await setup.schedules.run() }
        defer { runner.cancel() }
        try await setup.test { client in
            let plain = try await Self.create(client, text: "Doors close")
            #expect(String(buffer: plain.body).contains(#""paused":false"#))

            for (body, status) in [
                (#"{"announcement": {"text": "a"}, "at": "\#(Self.future())", "paused": "yes"}"#, 422),
                (#"{"announcement": {"text": "a"}, "at": "\#(Self.future())", "paused": 1}"#, 422),
                (#"{"announcement": {"text": "a"}, "at": "\#(Self.future())", "paused": true, "paused": false}"#, 400),
            ] {
                let response = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(body))
                #expect(response.status.code == status, "\(body)")
                #expect(try Self.error(response).field == "paused", "\(body)")
            }

            // Every second, paused from the start: its slots come and pass, none is spoken.
            let body = #"""
                {"announcement": {"text": "Lift out of order"}, "rrule": "FREQ=SECONDLY",
                 "start": "\#(Self.future(1))", "timeZone": "UTC", "paused": true}
                """#
            let created = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(body))
            #expect(created.status == .created)
            let id = try #require(created.headers[.location]).split(separator: "/").last.map(String.init) ?? ""
            #expect(String(buffer: created.body).contains(#""paused":true"#))

            var skipped: ScheduleChange?
            for await sequenced in events {
                #expect(sequenced.event.schedule?.change != .fired)
                if sequenced.event.id == id, sequenced.event.schedule?.change == .skipped {
                    skipped = sequenced.event.schedule
                    break
                }
            }
            #expect(skipped?.detail == "paused")
            let shown = try await client.execute(uri: "/v1/schedules/\(id)", method: .get)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(buffer: shown.body)) as? [String: Any])
            #expect(object["paused"] as? Bool == true)
            #expect(object["lastSlot"] as? String == skipped?.slot)
            #expect(object["next"] is String)
            let queued = try await client.execute(uri: "/v1/announcements", method: .get)
            #expect(!String(buffer: queued.body).contains("Lift out of order"))

            let resumed = try await client.execute(
                uri: "/v1/schedules/\(id)", method: .patch, body: jsonBody(#"{"paused": false}"#))
            #expect(resumed.status == .ok)
            #expect(String(buffer: resumed.body).contains(#""paused":false"#))
            let paused = try await client.execute(
                uri: "/v1/schedules/\(id)", method: .patch, body: jsonBody(#"{"paused": true}"#))
            #expect(String(buffer: paused.body).contains(#""paused":true"#))
            let cleared = try await client.execute(
                uri: "/v1/schedules/\(id)", method: .patch, body: jsonBody(#"{"paused": null}"#))
            #expect(String(buffer: cleared.body).contains(#""paused":false"#))
            let wrong = try await client.execute(
                uri: "/v1/schedules/\(id)", method: .patch, body: jsonBody(#"{"paused": "no"}"#))
            #expect(wrong.status == .unprocessableContent)
            #expect(try Self.error(wrong).field == "paused")
        }
    }

    static func create(_ client: some TestClientProtocol, text: String, at: String? = nil) async throws
        -> TestResponse
    {
        let body = #"{"announcement": {"text": "\#(text)"}, "at": "\#(at ?? future())"}"#
        return try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(body))
    }

    @Test("The number of schedules and the bytes they take are bounded: 409 scheduleLimit naming the field")
    func schedulesAreBounded() async throws {
        let limits = ScheduleService.Limits(maxSchedules: 3, maxStoredBytes: 2_000)
        try await Setup(limits: limits).test { client in
            for index in 0..<3 {
                #expect(try await Self.create(client, text: "Schedule \(index)").status == .created)
            }
            let fourth = try await Self.create(client, text: "One too many")
            #expect(fourth.status == .conflict)
            let full = try Self.error(fourth)
            #expect(full.code == "scheduleLimit" && full.field == "schedules", "\(full)")

            // After a delete there is room for one again, but not for a text past the bytes left.
            let listed = try decode(ScheduleIDs.self, try await client.execute(uri: "/v1/schedules", method: .get))
            let first = try #require(listed.schedules.first).id
            #expect(try await client.execute(uri: "/v1/schedules/\(first)", method: .delete).status == .noContent)
            let long = try await Self.create(client, text: String(repeating: "Long. ", count: 400))
            #expect(long.status == .conflict)
            let tooBig = try Self.error(long)
            #expect(tooBig.code == "scheduleLimit" && tooBig.field == "announcement", "\(tooBig)")
            // A patch is held to the same bytes.
            let second = try #require(listed.schedules.dropFirst().first).id
            let patched = try await client.execute(
                uri: "/v1/schedules/\(second)", method: .patch, headers: [.contentType: "application/merge-patch+json"],
                body: jsonBody(#"{"announcement": {"text": "\#(String(repeating: "Long. ", count: 400))"}}"#))
            #expect(patched.status == .conflict)
            #expect(try Self.error(patched).field == "announcement")
            #expect(try await Self.create(client, text: "Fits again").status == .created)
        }
    }

    struct ScheduleIDs: Decodable {
        struct Item: Decodable { var id: String }
        var schedules: [Item]
        var next: String?
    }

    @Test("GET /v1/schedules is paged like /v1/audit: limit and next, each schedule on one page, oldest first")
    func listIsPaged() async throws {
        try await Setup().test { client in
            var created: [String] = []
            for index in 0..<7 {
                let response = try await Self.create(client, text: "Page \(index)")
                created.append(try decode(ScheduleIDs.Item.self, response).id)
            }
            let (seen, pages) = try await Self.pages(client, limit: 3)
            #expect(pages == 3)
            #expect(seen == created, "each once, oldest first")
            let all = try decode(ScheduleIDs.self, try await client.execute(uri: "/v1/schedules", method: .get))
            #expect(all.schedules.map(\.id) == created && all.next == nil)

            try await Self.expectRefused(
                client,
                [("limit=0", "limit"), ("limit=1001", "limit"), ("after=nonsense", "after"), ("colour=red", "colour")])
        }
    }

    /// Every page of `GET /v1/schedules?limit&query`, following `next` (at most 10 pages).
    /// - Returns: the ids in the order listed, and how many pages held them.
    static func pages(_ client: some TestClientProtocol, limit: Int, query: String = "") async throws -> (
        ids: [String], pages: Int
    ) {
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let uri =
                "/v1/schedules?limit=\(limit)\(query.isEmpty ? "" : "&" + query)"
                + (cursor.map { "&after=\($0)" } ?? "")
            let response = try await client.execute(uri: uri, method: .get)
            #expect(response.status == .ok, "\(uri)")
            let page = try decode(ScheduleIDs.self, response)
            #expect(page.schedules.count <= limit)
            seen += page.schedules.map(\.id)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 10
        return (seen, pages)
    }

    /// Each `GET /v1/schedules?query` is 422 naming its field.
    static func expectRefused(_ client: some TestClientProtocol, _ cases: [(query: String, field: String)]) async throws
    {
        for (query, field) in cases {
            let response = try await client.execute(uri: "/v1/schedules?\(query)", method: .get)
            #expect(response.status == .unprocessableContent, "\(query)")
            #expect(try Self.error(response).field == field, "\(query)")
        }
    }

    @Test("GET /v1/schedules?q&paused: only the schedules that match, paged within them; a bad value is 422")
    func listIsFiltered() async throws {
        try await Setup().test { client in
            // Seven schedules, every other one about the doors; two of them paused, and one named.
            var doors: [String] = []
            var others: [String] = []
            for index in 0..<7 {
                let text = index.isMultiple(of: 2) ? "Doors closing, car \(index)" : "Mind the gap \(index)"
                let id = try decode(ScheduleIDs.Item.self, try await Self.create(client, text: text)).id
                if index.isMultiple(of: 2) { doors.append(id) } else { others.append(id) }
            }
            for id in [doors[1], doors[3]] {
                let paused = try await client.execute(
                    uri: "/v1/schedules/\(id)", method: .patch, headers: [.contentType: "application/merge-patch+json"],
                    body: jsonBody(#"{"paused": true, "name": "Nachtschicht Überfahrt"}"#))
                #expect(paused.status == .ok)
            }
            let spans =
                #"{"announcement": {"spans": [{"text": "Platform "}, {"text": "DOORS"}]}, "at": "\#(Self.future())"}"#
            let spanned = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(spans))
            doors.append(try decode(ScheduleIDs.Item.self, spanned).id)

            func list(_ query: String) async throws -> [String] {
                try await Self.pages(client, limit: 2, query: query).ids
            }
            // Case-insensitive, in a text, in a span, oldest first, each once across the pages.
            #expect(try await list("q=dOoRs") == doors)
            #expect(try await list("q=gap") == others)
            // A name, folded beyond ASCII; an id.
            #expect(try await list("q=%C3%BCBERFAHRT") == [doors[1], doors[3]])
            #expect(try await list("q=\(others[2])") == [others[2]])
            #expect(try await list("q=nowhere").isEmpty)
            // The state, alone and with a text.
            #expect(try await list("paused=true") == [doors[1], doors[3]])
            #expect(try await list("paused=false") == [doors[0], others[0], others[1], doors[2], others[2], doors[4]])
            #expect(try await list("paused=false&q=doors") == [doors[0], doors[2], doors[4]])
            // A key of the announcement is no text: "priority" is in none of them, "text" in all.
            #expect(try await list("q=text").isEmpty)

            try await Self.expectRefused(
                client,
                [
                    ("paused=yes", "paused"), ("paused=", "paused"), ("paused=TRUE", "paused"),
                    ("q=" + String(repeating: "a", count: 201), "q"), ("search=doors", "search"),
                ])
        }
    }

    struct Preview: Decodable {
        struct Slot: Decodable, Equatable {
            var utc: String
            var local: String
        }
        var rrule: String?
        var timeZone: String?
        var next: String?
        var slots: [Slot]
    }

    @Test("POST /v1/schedule-preview: the rule as stored and the next slots across a DST change, nothing stored")
    func previewAcrossSummerTime() async throws {
        // Thursday 25 March 2027, noon UTC; Lisbon moves to summer time (UTC+1) on Sunday the 28th.
        let now = Date(timeIntervalSince1970: 1_805_976_000)
        try await Setup(now: { now }).test { client in
            let body = #"""
                {"announcement": {"text": "The museum opens"}, "rrule": "BYMINUTE=30;FREQ=DAILY;BYHOUR=8",
                 "start": "2027-03-01T00:00:00Z", "timeZone": "Europe/Lisbon"}
                """#
            let response = try await client.execute(
                uri: "/v1/schedule-preview?count=4", method: .post, body: jsonBody(body))
            #expect(response.status == .ok)
            let preview = try decode(Preview.self, response)
            #expect(preview.rrule == "FREQ=DAILY;BYHOUR=8;BYMINUTE=30")
            #expect(preview.timeZone == "Europe/Lisbon")
            // The local hour holds at 08:30; the UTC hour moves from 08:30 to 07:30.
            #expect(
                preview.slots == [
                    .init(utc: "2027-03-26T08:30:00Z", local: "2027-03-26T08:30:00Z"),
                    .init(utc: "2027-03-27T08:30:00Z", local: "2027-03-27T08:30:00Z"),
                    .init(utc: "2027-03-28T07:30:00Z", local: "2027-03-28T08:30:00+01:00"),
                    .init(utc: "2027-03-29T07:30:00Z", local: "2027-03-29T08:30:00+01:00"),
                ])
            #expect(preview.next == "2027-03-26T08:30:00.000Z")
            let ten = try decode(
                Preview.self, try await client.execute(uri: "/v1/schedule-preview", method: .post, body: jsonBody(body))
            )
            #expect(ten.slots.count == 10, "ten slots when no count is given")

            // Refused as POST /v1/schedules refuses the same body, with the same error.
            for refused in [
                #"{"announcement": {"text": "a"}, "rrule": "FREQ=SOMETIMES", "start": "2027-03-01T00:00:00Z", "timeZone": "UTC"}"#,
                #"{"announcement": {"text": "a"}, "at": "2027-03-01T00:00:00Z"}"#,
                #"{"announcement": {"text": "a"}, "at": "2027-04-01T00:00:00Z", "colour": "red"}"#,
                #"{"announcement": {"text": "a"}, "at": "2027-04-01T00:00:00Z", "at": "2027-04-02T00:00:00Z"}"#,
            ] {
                let previewed = try await client.execute(
                    uri: "/v1/schedule-preview", method: .post, body: jsonBody(refused))
                let created = try await client.execute(uri: "/v1/schedules", method: .post, body: jsonBody(refused))
                #expect(previewed.status == created.status && previewed.status != .ok, "\(refused)")
                #expect(try Self.error(previewed) == Self.error(created), "\(refused)")
            }
            for (query, field) in [("count=0", "count"), ("count=101", "count"), ("colour=red", "colour")] {
                let wrong = try await client.execute(
                    uri: "/v1/schedule-preview?\(query)", method: .post, body: jsonBody(body))
                #expect(wrong.status == .unprocessableContent, "\(query)")
                #expect(try Self.error(wrong).field == field, "\(query)")
            }
            let listed = try decode(ScheduleIDs.self, try await client.execute(uri: "/v1/schedules", method: .get))
            #expect(listed.schedules.isEmpty, "a preview stores nothing")
        }
    }
}
