import Foundation
internal import GRDB

/// The audit log: one row per announcement from acceptance to outcome, and one per refusal.
///
/// An entry is open from ``opened(_:)`` until ``finished(id:reason:detail:at:)``; a daemon killed
/// in between leaves it open, and ``closeUnfinished(reason:detail:at:)`` gives it an outcome at the
/// next start. Each call is one transaction, durable when it returns.
public final class AuditLog: Sendable {
    private let storage: Storage

    init(storage: Storage) {
        self.storage = storage
    }

    private static let columns = """
        seq, id, front, origin, output, priority, queued, started, finished, reason, detail, error, repeats, \
        schedule, text, private
        """
    /// Open rows: accepted, with no outcome yet.
    private static let isOpen = "reason IS NULL AND error IS NULL"
    /// The newest open row of an announcement.
    private static let newestOpen = "seq = (SELECT max(seq) FROM audit WHERE id = ? AND \(isOpen))"

    /// Records an accepted announcement; returns its `seq`.
    ///
    /// The text of a private entry is dropped here whatever the caller passed.
    @discardableResult
    public func opened(_ entry: AuditEntry) throws(StateError) -> Int64 {
        try storage.write("record an audit entry") { db in try Self.insert(entry, db) }
    }

    /// Records a refused request; returns its `seq`.
    ///
    /// A refusal is closed from the start; without an error code it is recorded as `refused`.
    @discardableResult
    public func refused(_ entry: AuditEntry) throws(StateError) -> Int64 {
        var entry = entry
        entry.error = entry.error ?? "refused"
        return try storage.write("record a refusal") { db in try Self.insert(entry, db) }
    }

    /// Records when the newest open entry of announcement `id` started to sound.
    /// - Returns: false when no open entry has that id.
    @discardableResult
    public func started(id: String, at time: Date) throws(StateError) -> Bool {
        try storage.write("record a start") { db in
            try db.cachedStatement(sql: "UPDATE audit SET started = ? WHERE \(Self.newestOpen)")
                .execute(arguments: [time.storedMilliseconds, id])
            return db.changesCount > 0
        }
    }

    /// Records the outcome of the newest open entry of announcement `id`; it is on disk when this returns.
    /// - Returns: false when no open entry has that id.
    @discardableResult
    public func finished(id: String, reason: String, detail: String?, at time: Date) throws(StateError) -> Bool {
        // One statement, prepared once per connection: this runs before the `finished` event goes out.
        try storage.write("record an outcome") { db in
            try db.cachedStatement(
                sql: "UPDATE audit SET finished = ?, reason = ?, detail = ? WHERE \(Self.newestOpen)"
            )
            .execute(arguments: [time.storedMilliseconds, reason, detail, id])
            return db.changesCount > 0
        }
    }

    /// Counts one more repetition on the newest entry of announcement `id`.
    /// - Returns: false when no entry has that id.
    @discardableResult
    public func repeated(id: String) throws(StateError) -> Bool {
        try storage.write("record a repetition") { db in
            try db.cachedStatement(
                sql: "UPDATE audit SET repeats = repeats + 1 WHERE seq = (SELECT max(seq) FROM audit WHERE id = ?)"
            ).execute(arguments: [id])
            return db.changesCount > 0
        }
    }

    /// Gives every open entry an outcome, at start, for announcements a killed daemon left unfinished.
    /// - Returns: the entries it closed, as they now are, oldest first.
    public func closeUnfinished(reason: String, detail: String, at time: Date) throws(StateError) -> [AuditEntry] {
        try storage.write("close unfinished audit entries") { db in
            try Row.fetchAll(
                db,
                sql: """
                    UPDATE audit SET finished = ?, reason = ?, detail = ? WHERE \(Self.isOpen)
                    RETURNING \(Self.columns)
                    """,
                arguments: [time.storedMilliseconds, reason, detail]
            ).map(Self.entry).sorted { ($0.seq ?? 0) < ($1.seq ?? 0) }
        }
    }

    /// Reads entries that match `filter`, oldest first, after the `cursor` (a `seq`).
    /// - Parameters:
    ///   - filter: what to read.
    ///   - cursor: the `next` of the previous page, or nil for the first.
    ///   - limit: the most entries to return (at least 1).
    /// - Returns: the entries, and the cursor of the next page, nil when there is none.
    public func entries(_ filter: AuditFilter, after cursor: Int64?, limit: Int) throws(StateError) -> (
        entries: [AuditEntry], next: Int64?
    ) {
        let limit = max(1, limit)
        var conditions = ["seq > ?"]
        var values: [any DatabaseValueConvertible] = [cursor ?? 0]
        func match(_ condition: String, _ bound: any DatabaseValueConvertible...) {
            conditions.append(condition)
            values += bound
        }
        if let since = filter.since { match("queued >= ?", since.storedMilliseconds) }
        if let until = filter.until { match("queued < ?", until.storedMilliseconds) }
        if let output = filter.output { match("output = ?", output) }
        if let reason = filter.reason { match("(reason = ? OR error = ?)", reason, reason) }
        if let front = filter.front { match("front = ?", front) }
        if let id = filter.id { match("id = ?", id) }
        if let schedule = filter.schedule { match("schedule = ?", schedule) }
        if let refusals = filter.refusals { match(refusals ? "error IS NOT NULL" : "error IS NULL") }
        let sql = """
            SELECT \(Self.columns) FROM audit WHERE \(conditions.joined(separator: " AND "))
            ORDER BY seq LIMIT \(limit + 1)
            """
        let rows = try storage.read("read the audit log") { db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(values)).map(Self.entry)
        }
        guard rows.count > limit else { return (rows, nil) }
        let page = Array(rows.prefix(limit))
        return (page, page.last?.seq)
    }

    /// Removes entries older than the retention's age and beyond its count; open entries stay.
    /// - Returns: how many entries were removed.
    @discardableResult
    public func prune(_ retention: AuditRetention, now: Date) throws(StateError) -> Int {
        try storage.write("prune the audit log") { db in
            var removed = 0
            if let maxAge = retention.maxAge {
                let age = maxAge.components
                let cutoff = now.addingTimeInterval(-(Double(age.seconds) + Double(age.attoseconds) / 1e18))
                try db.execute(
                    sql: "DELETE FROM audit WHERE queued < ? AND NOT (\(Self.isOpen))",
                    arguments: [cutoff.storedMilliseconds])
                removed += db.changesCount
            }
            try db.execute(
                sql: """
                    DELETE FROM audit WHERE seq <= (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1 OFFSET ?)
                    AND NOT (\(Self.isOpen))
                    """,
                arguments: [max(0, retention.maxEntries)])
            removed += db.changesCount
            if let maxBytes = retention.maxBytes {
                // Freed pages are reused, not returned: what counts is the pages in use. A tenth of
                // what is left goes per round, oldest first, until it fits or only open rows remain.
                while try Self.bytesInUse(db) > maxBytes {
                    let closed =
                        try Int.fetchOne(db, sql: "SELECT count(*) FROM audit WHERE NOT (\(Self.isOpen))") ?? 0
                    guard closed > 0 else { break }
                    try db.execute(
                        sql: "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE NOT (\(Self.isOpen)) "
                            + "ORDER BY seq LIMIT ?)",
                        arguments: [max(1, closed / 10)])
                    removed += db.changesCount
                }
            }
            return removed
        }
    }

    /// The bytes of the database's pages in use (not on the free list).
    static func bytesInUse(_ db: Database) throws -> Int {
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        let size = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
        return (pages - free) * size
    }

    private static func insert(_ entry: AuditEntry, _ db: Database) throws -> Int64 {
        try db.cachedStatement(
            sql: """
                INSERT INTO audit (id, front, origin, output, priority, queued, started, finished, reason, detail,
                                   error, repeats, schedule, text, private)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            entry.id, entry.front, entry.origin, entry.output, entry.priority,
            (entry.queued ?? Date()).storedMilliseconds, entry.started.storedMilliseconds,
            entry.finished.storedMilliseconds, entry.reason, entry.detail, entry.error, entry.repeats,
            entry.schedule,
            // Callers pass nil for a private text already; dropping it here too keeps a slip in
            // a caller from writing it to disk.
            entry.isPrivate ? nil : entry.text,
            entry.isPrivate,
        ])
        return db.lastInsertedRowID
    }

    private static func entry(_ row: Row) -> AuditEntry {
        AuditEntry(
            seq: row["seq"], id: row["id"], front: row["front"], origin: row["origin"], output: row["output"],
            priority: row["priority"], queued: row.date("queued"), started: row.date("started"),
            finished: row.date("finished"), reason: row["reason"], detail: row["detail"], error: row["error"],
            repeats: row["repeats"], schedule: row["schedule"], text: row["text"], isPrivate: row["private"])
    }
}
