import Foundation
import GRDB
import Testing

@testable import SpeakState

@Suite struct AuditLogTests {
    @Test func aBatchIsWrittenInOrderInOneTransactionOnAnInMemoryDatabase() async throws {
        let database = try StateDatabase(writer: try DatabaseQueue())
        let audit = database.audit
        var secret = entry("b1", front: "http")
        secret.text = "the door code"
        secret.isPrivate = true
        let start = Date(timeIntervalSince1970: 1_800_000_000.123)
        let inserted = try await audit.apply([
            .opened(secret), .started(id: "b1", at: start), .repeated(id: "b1"),
            .finished(id: "b1", reason: "completed", detail: nil, at: start.addingTimeInterval(2)),
            .opened(entry("b2", front: "ssip")),
        ])
        #expect(inserted == 2)
        let rows = try await audit.entries(AuditFilter(), after: nil, limit: 10).entries
        #expect(rows.map(\.id) == ["b1", "b2"])
        #expect(rows.first?.reason == "completed" && rows.first?.repeats == 1)
        #expect(rows.first?.started == start && rows.first?.text == nil && rows.first?.isPrivate == true)
        #expect(rows.last?.reason == nil && rows.last?.seq == 2)
        // One transaction: a batch that fails writes none of its changes.
        try await database.storage.writer.write { db in
            try db.execute(
                sql:
                    "CREATE TRIGGER refuse BEFORE INSERT ON audit WHEN NEW.id = 'b4' BEGIN SELECT RAISE(ABORT, 'no'); END"
            )
        }
        await #expect(throws: StateError.self) {
            try await audit.apply([.opened(entry("b3", front: "http")), .opened(entry("b4", front: "http"))])
        }
        #expect(try await audit.entries(AuditFilter(), after: nil, limit: 10).entries.count == 2)
    }

    /// A batch writes a change to a row opened earlier in it into that row's INSERT, and leaves
    /// the rows its changes make one at a time: each `started` and `finished` goes to the newest
    /// open row of its id, a `repeat` to the newest row, and one that finds no row changes nothing.
    @Test func aBatchLeavesTheRowsItsChangesMakeOneAtATime() async throws {
        var refusedAtOnce = entry("z")
        refusedAtOnce.error = "output_unavailable"
        let at = { (seconds: Double) in t0.addingTimeInterval(seconds) }
        let changes: [AuditChange] = [
            .opened(entry("x")), .started(id: "x", at: at(1)),
            .finished(id: "x", reason: "completed", detail: nil, at: at(2)),
            .finished(id: "x", reason: "cancelled", detail: "the older one", at: at(3)), .repeated(id: "x"),
            .opened(entry("y")), .opened(entry("y")),
            .finished(id: "y", reason: "discarded", detail: "busy", at: at(4)),
            .started(id: "y", at: at(5)), .repeated(id: "y"), .opened(refusedAtOnce), .started(id: "z", at: at(6)),
            .finished(id: "nobody", reason: "failed", detail: nil, at: at(7)),
            .opened(entry("p", text: "the door code", isPrivate: true)), .repeated(id: "p"), .repeated(id: "p"),
        ]
        var rows: [[AuditEntry]] = []
        for batched in [false, true] {
            let audit = try StateDatabase(writer: try DatabaseQueue()).audit
            // An open row of `x` from before the batch.
            try audit.opened(entry("x"))
            if batched {
                #expect(try await audit.apply(changes) == 5)
            } else {
                for change in changes { try await audit.apply([change]) }
            }
            rows.append(try await audit.entries(AuditFilter(), after: nil, limit: 100).entries)
        }
        #expect(rows[1] == rows[0])
        #expect(rows[1].map(\.reason) == ["cancelled", "completed", nil, "discarded", nil, nil])
        #expect(rows[1].map(\.repeats) == [0, 1, 0, 1, 0, 2])
        #expect(rows[1].map(\.started) == [nil, at(1), at(5), nil, nil, nil])
        #expect(rows[1].last?.text == nil)
    }

    /// A batch returns without a disk flush: another connection (as after a `kill -9`, the kernel
    /// holds the WAL) reads it at once, and the syncer's checkpoint has put it in the database
    /// file itself within a few seconds: a copy of that file alone, without its WAL, has the row.
    @Test func aBatchIsReadAtOnceAndReachesTheDatabaseFileWithinSeconds() async throws {
        let dir = TemporaryDirectory()
        let database = try StateDatabase(directory: dir.state)
        #expect(try await database.audit.apply([.opened(entry("w1", front: "http"))]) == 1)
        let other = try DatabaseQueue(path: database.path)
        #expect(try await other.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM audit") } == 1)
        try other.close()
        let copy = dir.path + "/copy.sqlite"
        var rows = 0
        for _ in 0..<50 where rows == 0 {
            try await Task.sleep(for: .milliseconds(100))
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.copyItem(atPath: database.path, toPath: copy)
            let alone = try DatabaseQueue(path: copy)
            // Before the checkpoint, the file alone has not even the table.
            rows = (try? await alone.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM audit") }) ?? 0
            try alone.close()
        }
        #expect(rows == 1, "the row never reached the database file")
    }

    @Test func announcementFromAcceptanceToOutcome() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        var accepted = entry("a1", front: "mqtt")
        accepted.origin = "mqtt client=kiosk-1 requestId=r1"
        accepted.schedule = "s1"
        let seq = try audit.opened(accepted)
        #expect(try audit.started(id: "a1", at: t0.addingTimeInterval(0.25)))
        #expect(try audit.repeated(id: "a1"))
        #expect(try audit.repeated(id: "a1"))
        #expect(try audit.finished(id: "a1", reason: "completed", detail: "spoken twice", at: t0.addingTimeInterval(2)))
        // Closed: a late second outcome finds nothing open.
        #expect(try !audit.finished(id: "a1", reason: "cancelled", detail: nil, at: t0.addingTimeInterval(3)))
        #expect(try !audit.started(id: "nobody", at: t0))

        let stored = try #require(try await audit.entries(AuditFilter(), after: nil, limit: 10).entries.first)
        accepted.seq = seq
        accepted.started = t0.addingTimeInterval(0.25)
        accepted.finished = t0.addingTimeInterval(2)
        accepted.reason = "completed"
        accepted.detail = "spoken twice"
        accepted.repeats = 2
        #expect(stored == accepted)
        #expect(!stored.isRefusal)
    }

    @Test func outcomesGoToTheNewestOpenRowOfAnId() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        try audit.opened(entry("same"))
        try audit.finished(id: "same", reason: "completed", detail: nil, at: t0)
        try audit.opened(entry("same"))
        try audit.finished(id: "same", reason: "failed", detail: "output gone", at: t0)
        let rows = try await audit.entries(AuditFilter(id: "same"), after: nil, limit: 10).entries
        #expect(rows.map(\.reason) == ["completed", "failed"])
    }

    @Test func timesKeepMilliseconds() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        let queued = Date(timeIntervalSince1970: 1_790_000_000.987)
        try audit.opened(entry("ms", queued: queued))
        try audit.started(id: "ms", at: queued.addingTimeInterval(0.001))
        let row = try #require(try await audit.entries(AuditFilter(), after: nil, limit: 1).entries.first)
        #expect(row.queued == queued)
        #expect(row.started == Date(timeIntervalSince1970: 1_790_000_000.988))
    }

    @Test func unfinishedRowsGetAnOutcomeAtStart() async throws {
        let dir = TemporaryDirectory()
        do {
            let audit = try StateDatabase(directory: dir.state).audit
            try audit.opened(entry("done"))
            try audit.finished(id: "done", reason: "completed", detail: nil, at: t0)
            try audit.opened(entry("speaking"))
            try audit.started(id: "speaking", at: t0)
            try audit.opened(entry("waiting"))
            try audit.refused(AuditEntry(front: "http", origin: "tcp token", queued: t0, error: "queue_full"))
        }
        let audit = try StateDatabase(directory: dir.state).audit
        let later = t0.addingTimeInterval(60)
        let closed = try audit.closeUnfinished(reason: "failed", detail: "daemon stopped", at: later)
        #expect(closed.map(\.id) == ["speaking", "waiting"])
        #expect(closed.allSatisfy { $0.reason == "failed" && $0.detail == "daemon stopped" && $0.finished == later })
        #expect(closed.first?.started == t0)
        #expect(try audit.closeUnfinished(reason: "failed", detail: "again", at: later).isEmpty)
        let all = try await audit.entries(AuditFilter(), after: nil, limit: 10).entries
        #expect(all.map(\.reason) == ["completed", "failed", "failed", nil])
    }

    @Test func refusalsAreClosedAndCarryTheirCode() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        let seq = try audit.refused(
            AuditEntry(front: "ssip", origin: "ssip client=orca", queued: t0, error: "text_too_long", text: "hi"))
        let unnamed = try audit.refused(AuditEntry(id: "given", front: "http", origin: "tcp token", queued: t0))
        #expect(unnamed > seq)
        let rows = try await audit.entries(AuditFilter(refusals: true), after: nil, limit: 10).entries
        #expect(rows.map(\.error) == ["text_too_long", "refused"])
        #expect(rows.map(\.id) == [nil, "given"])
        #expect(rows.allSatisfy { $0.isRefusal && $0.reason == nil })
        #expect(try await audit.entries(AuditFilter(refusals: false), after: nil, limit: 10).entries.isEmpty)
        #expect(try audit.closeUnfinished(reason: "failed", detail: "x", at: t0).isEmpty)
    }

    @Test func filtersMatchEveryFieldThatIsSet() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        let minute = 60.0
        try audit.opened(entry("h1", front: "http", output: "hall", queued: t0))
        try audit.finished(id: "h1", reason: "completed", detail: nil, at: t0)
        try audit.opened(entry("m1", front: "mqtt", output: "yard", queued: t0 + minute))
        try audit.finished(id: "m1", reason: "output_unavailable", detail: nil, at: t0 + minute)
        try audit.opened(entry("s1", front: "ssip", output: "hall", queued: t0 + 2 * minute))
        try audit.finished(id: "s1", reason: "cancelled", detail: nil, at: t0 + 2 * minute)
        try audit.refused(
            AuditEntry(
                front: "mqtt", origin: "mqtt client=k", output: "yard", queued: t0 + 3 * minute,
                error: "output_unavailable"))
        try audit.opened(entry("h2", front: "http", output: "hall", queued: t0 + 4 * minute))

        func ids(_ filter: AuditFilter) async throws -> [String] {
            try await audit.entries(filter, after: nil, limit: 100).entries.map { $0.id ?? "refused" }
        }
        #expect(try await ids(AuditFilter()) == ["h1", "m1", "s1", "refused", "h2"])
        // since ≤ queued < until
        #expect(try await ids(AuditFilter(since: t0 + minute, until: t0 + 3 * minute)) == ["m1", "s1"])
        #expect(try await ids(AuditFilter(since: t0 + 3 * minute)) == ["refused", "h2"])
        #expect(try await ids(AuditFilter(until: t0 + minute)) == ["h1"])
        #expect(try await ids(AuditFilter(output: "hall")) == ["h1", "s1", "h2"])
        #expect(try await ids(AuditFilter(front: "mqtt")) == ["m1", "refused"])
        // A reason matches outcomes and refusals alike.
        #expect(try await ids(AuditFilter(reason: "output_unavailable")) == ["m1", "refused"])
        #expect(try await ids(AuditFilter(reason: "cancelled")) == ["s1"])
        #expect(try await ids(AuditFilter(output: "hall", reason: "completed", front: "http")) == ["h1"])
        #expect(try await ids(AuditFilter(output: "nowhere")) == [])
    }

    @Test func textSearchFindsWordsAsTheyAreAndNeverAPrivateRow() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        try audit.opened(entry("t1", text: "The 10:15 to Faro leaves from platform 2"))
        try audit.opened(entry("t2", text: "Platform 12 is closed: 100% of trains use platform_3"))
        try audit.opened(entry("t3", text: "Your code is platform 2", isPrivate: true))
        try audit.opened(entry("t4", text: nil))
        func ids(_ text: String) async throws -> [String] {
            var filter = AuditFilter()
            filter.text = text
            return try await audit.entries(filter, after: nil, limit: 100).entries.compactMap(\.id)
        }
        #expect(try await ids("platform") == ["t1", "t2"], "ASCII letters in either case; the private row never")
        #expect(try await ids("PLATFORM 2") == ["t1"])
        #expect(try await ids("faro") == ["t1"])
        // LIKE's wildcards are taken as they are written.
        #expect(try await ids("100%") == ["t2"])
        #expect(try await ids("%") == ["t2"])
        #expect(try await ids("platform_3") == ["t2"])
        #expect(try await ids("platform_2") == [])
        #expect(try await ids("Your code") == [])
    }

    @Test func cursorPagesThroughThreePages() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        for n in 0..<25 {
            try audit.opened(entry("a\(n)", front: n % 2 == 0 ? "http" : "mqtt"))
        }
        var seen: [String] = []
        var cursor: Int64?
        var pages = 0
        repeat {
            let page = try await audit.entries(AuditFilter(front: "http"), after: cursor, limit: 5)
            seen += page.entries.compactMap(\.id)
            cursor = page.next
            pages += 1
            if cursor != nil { #expect(page.entries.count == 5) }
        } while cursor != nil
        #expect(pages == 3)
        #expect(seen == stride(from: 0, to: 25, by: 2).map { "a\($0)" })

        // A page that ends exactly at the last row says so.
        let exact = try await audit.entries(AuditFilter(), after: nil, limit: 25)
        #expect(exact.entries.count == 25)
        #expect(exact.next == nil)
    }

    @Test func pruneByAgeAndByCountKeepsOpenRows() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        let day = 86_400.0
        for n in 0..<10 {
            try audit.opened(entry("old\(n)", queued: t0 - Double(100 + n) * day))
            try audit.finished(id: "old\(n)", reason: "completed", detail: nil, at: t0)
        }
        try audit.opened(entry("old-open", queued: t0 - 100 * day))
        for n in 0..<20 {
            try audit.opened(entry("new\(n)", queued: t0 - Double(n) * 3600))
            try audit.finished(id: "new\(n)", reason: "completed", detail: nil, at: t0)
        }
        #expect(try audit.prune(AuditRetention(), now: t0) == 10)
        var left = try await audit.entries(AuditFilter(), after: nil, limit: 100).entries.compactMap(\.id)
        #expect(left.count == 21)
        #expect(left.first == "old-open")

        #expect(try audit.prune(AuditRetention(maxAge: nil, maxEntries: 5), now: t0) == 15)
        left = try await audit.entries(AuditFilter(), after: nil, limit: 100).entries.compactMap(\.id)
        #expect(left == ["old-open", "new15", "new16", "new17", "new18", "new19"])
        #expect(try audit.prune(AuditRetention(maxAge: .seconds(1), maxEntries: 100), now: t0) == 5)

        // seq is never reused after a prune, so a cursor held across it stays valid.
        let before = try await audit.entries(AuditFilter(), after: nil, limit: 100).entries.last?.seq ?? 0
        try audit.prune(AuditRetention(maxAge: nil, maxEntries: 0), now: t0)
        let seq = try audit.opened(entry("next"))
        #expect(seq > before)
    }

    @Test func pruneBySizeRemovesTheOldestUntilItFits() async throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        let text = String(repeating: "A long announcement text. ", count: 40)
        for n in 0..<2_000 {
            var row = entry("r\(n)")
            row.text = text
            try audit.opened(row)
            try audit.finished(id: "r\(n)", reason: "completed", detail: nil, at: t0)
        }
        try audit.opened(entry("still-open"))
        let limit = 512 << 10
        let removed = try audit.prune(AuditRetention(maxAge: nil, maxEntries: 100_000, maxBytes: limit), now: t0)
        let left = try await audit.entries(AuditFilter(), after: nil, limit: 5_000).entries.compactMap(\.id)
        #expect(removed > 1_000 && removed + left.count == 2_001, "removed \(removed), left \(left.count)")
        #expect(left.first == "still-open" || left.contains("still-open"))
        #expect(left.contains("r1999"), "the newest stay")
        // What is left fits: another prune removes nothing.
        #expect(try audit.prune(AuditRetention(maxAge: nil, maxEntries: 100_000, maxBytes: limit), now: t0) == 0)
    }

    /// `finished` runs before the `finished` event goes out; this prints how long it takes on this disk.
    @Test func finishedTiming() throws {
        let dir = TemporaryDirectory()
        let audit = try StateDatabase(directory: dir.state).audit
        for n in 0..<2000 { try audit.refused(entry("filler\(n)")) }
        var samples: [Duration] = []
        let clock = ContinuousClock()
        for n in 0..<200 {
            try audit.opened(entry("t\(n)"))
            samples.append(
                try clock.measure {
                    try audit.finished(id: "t\(n)", reason: "completed", detail: nil, at: t0)
                })
        }
        samples.sort()
        func ms(_ d: Duration) -> String {
            String(format: "%.3f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1e3)
        }
        print(
            "AuditLog.finished with synchronous=FULL: median \(ms(samples[100])), p95 \(ms(samples[190])), "
                + "max \(ms(samples[199])) over 200 calls")
    }
}
