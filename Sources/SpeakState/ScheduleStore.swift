import Foundation
internal import GRDB

/// A schedule as stored: its definition is opaque here, owned by the scheduler.
public struct StoredSchedule: Sendable, Equatable {
    /// A short random id: 12 characters of lowercase base32, safe in a URL.
    public var id: String
    /// The schedule's canonical JSON.
    public var definition: Data
    /// When it was created.
    public var created: Date
    /// When its definition last changed.
    public var updated: Date
    /// The last slot fired or skipped; the scheduler resumes after it.
    public var lastSlot: Date?

    /// Creates a stored schedule.
    public init(id: String, definition: Data, created: Date, updated: Date, lastSlot: Date? = nil) {
        self.id = id
        self.definition = definition
        self.created = created
        self.updated = updated
        self.lastSlot = lastSlot
    }
}

/// What the planner keeps of a stored schedule: its definition without its announcement, so the
/// daemon's memory does not grow with the texts it stores.
public struct StoredPlan: Sendable, Equatable {
    public var id: String
    /// The schedule's canonical JSON without its `announcement` key.
    public var plan: Data
    public var created: Date
    public var updated: Date
    public var lastSlot: Date?

    /// Creates a stored plan.
    public init(id: String, plan: Data, created: Date, updated: Date, lastSlot: Date? = nil) {
        self.id = id
        self.plan = plan
        self.created = created
        self.updated = updated
        self.lastSlot = lastSlot
    }
}

/// The schedules created through the API, so they outlive a restart, and how far each has fired.
public final class ScheduleStore: Sendable {
    private let storage: Storage

    init(storage: Storage) {
        self.storage = storage
    }

    private static let columns = "id, definition, created, updated, lastSlot"

    /// Stores a new schedule under a fresh id.
    public func insert(definition: Data, now: Date) throws(StateError) -> StoredSchedule {
        try insert(definition: definition, now: now, id: nil)!
    }

    /// Stores a new schedule under `id` (one a fleet names, so that every kiosk knows it by the
    /// same id), or under a new random one when `id` is nil.
    /// - Returns: the schedule as stored; nil when `id` is taken.
    public func insert(definition: Data, now: Date, id given: String?) throws(StateError) -> StoredSchedule? {
        try storage.write("store a schedule") { db in
            func taken(_ id: String) throws -> Bool {
                try Bool.fetchOne(db, sql: "SELECT 1 FROM schedule WHERE id = ?", arguments: [id]) == true
            }
            if let given, try taken(given) { return nil }
            // 60 random bits make a clash unlikely; a clash draws again rather than overwrite.
            var id = given ?? Self.newID()
            while given == nil, try taken(id) { id = Self.newID() }
            try db.execute(
                sql: "INSERT INTO schedule (id, definition, created, updated) VALUES (?, ?, ?, ?)",
                arguments: [id, definition, now.storedMilliseconds, now.storedMilliseconds])
            let stored = Date(storedMilliseconds: now.storedMilliseconds)
            return StoredSchedule(id: id, definition: definition, created: stored, updated: stored)
        }
    }

    /// Every stored schedule, oldest first.
    public func all() throws(StateError) -> [StoredSchedule] {
        try storage.read("read the schedules") { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.columns) FROM schedule ORDER BY created, id").map(Self.schedule)
        }
    }

    /// A page of schedules in the order `all()` gives, after `cursor` (the `next` of the page
    /// before, nil for the first), at most `limit` of them.
    /// - Returns: the page, and the cursor of the next one when there are more.
    public func page(after cursor: String?, limit: Int) throws(StateError) -> (
        schedules: [StoredSchedule], next: String?
    ) {
        try storage.read("read the schedules") { db in
            var sql = "SELECT \(Self.columns) FROM schedule"
            var values: [any DatabaseValueConvertible] = []
            if let cursor, let (created, id) = Self.parse(cursor: cursor) {
                sql += " WHERE created > ? OR (created = ? AND id > ?)"
                values += [created, created, id]
            }
            sql += " ORDER BY created, id LIMIT ?"
            values.append(limit + 1)
            var rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(values)).map(Self.schedule)
            guard rows.count > limit else { return (rows, nil) }
            rows.removeLast()
            return (rows, rows.last.map(Self.cursor))
        }
    }

    /// Whether `text` is a cursor `page(after:limit:)` gave.
    public static func isCursor(_ text: String) -> Bool { parse(cursor: text) != nil }

    /// `created-id`: created in milliseconds, then the id, so a deleted schedule's cursor still works.
    private static func cursor(_ schedule: StoredSchedule) -> String {
        "\(schedule.created.storedMilliseconds)-\(schedule.id)"
    }

    private static func parse(cursor: String) -> (Int64, String)? {
        guard let dash = cursor.firstIndex(of: "-"), let created = Int64(cursor[..<dash]),
            cursor[..<dash].allSatisfy(\.isASCII)
        else { return nil }
        let id = cursor[cursor.index(after: dash)...]
        return id.isEmpty ? nil : (created, String(id))
    }

    /// Every schedule's plan, oldest first: its definition without the announcement, which
    /// SQLite takes out, so the texts are never read into memory together.
    public func plans() throws(StateError) -> [StoredPlan] {
        try storage.read("read the schedules") { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, json_remove(CAST(definition AS TEXT), '$.announcement') AS plan, created, updated,
                    lastSlot FROM schedule ORDER BY created, id
                    """
            ).map { row in
                StoredPlan(
                    id: row["id"], plan: Data((row["plan"] as String? ?? "{}").utf8),
                    created: row.date("created") ?? .distantPast, updated: row.date("updated") ?? .distantPast,
                    lastSlot: row.date("lastSlot"))
            }
        }
    }

    /// How many schedules are stored, and the bytes of their definitions together.
    public func usage() throws(StateError) -> (count: Int, bytes: Int) {
        try storage.read("count the schedules") { db in
            let row = try Row.fetchOne(
                db, sql: "SELECT count(*) AS count, coalesce(sum(length(definition)), 0) AS bytes FROM schedule")
            return (row?["count"] ?? 0, row?["bytes"] ?? 0)
        }
    }

    /// The schedule with this id, or nil.
    public func get(id: String) throws(StateError) -> StoredSchedule? {
        try storage.read("read a schedule") { db in try Self.fetch(id, db) }
    }

    /// Replaces a schedule's definition; its id, creation time and last slot stay.
    /// - Returns: the schedule as now stored, or nil when there is none with this id.
    @discardableResult
    public func update(id: String, definition: Data, now: Date) throws(StateError) -> StoredSchedule? {
        try storage.write("update a schedule") { db in
            try db.execute(
                sql: "UPDATE schedule SET definition = ?, updated = ? WHERE id = ?",
                arguments: [definition, now.storedMilliseconds, id])
            return db.changesCount > 0 ? try Self.fetch(id, db) : nil
        }
    }

    /// Deletes a schedule.
    /// - Returns: false when there was none with this id.
    @discardableResult
    public func delete(id: String) throws(StateError) -> Bool {
        try storage.write("delete a schedule") { db in
            try db.execute(sql: "DELETE FROM schedule WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    /// Records that `slot` fired or was skipped; a slot earlier than the one recorded changes nothing.
    ///
    /// On disk when it returns, so a restart never fires the slot again.
    /// - Returns: false when there is no schedule with this id.
    @discardableResult
    public func markSlot(id: String, slot: Date) throws(StateError) -> Bool {
        try storage.write("record a schedule slot") { db in
            // SQLite's max() of a NULL is NULL, hence the coalesce for a schedule that never fired.
            try db.execute(
                sql: "UPDATE schedule SET lastSlot = max(coalesce(lastSlot, ?1), ?1) WHERE id = ?2",
                arguments: [slot.storedMilliseconds, id])
            return db.changesCount > 0
        }
    }

    private static func fetch(_ id: String, _ db: Database) throws -> StoredSchedule? {
        try Row.fetchOne(db, sql: "SELECT \(columns) FROM schedule WHERE id = ?", arguments: [id]).map(schedule)
    }

    private static func schedule(_ row: Row) -> StoredSchedule {
        StoredSchedule(
            id: row["id"], definition: row["definition"], created: row.date("created") ?? .distantPast,
            updated: row.date("updated") ?? .distantPast, lastSlot: row.date("lastSlot"))
    }

    /// RFC 4648 base32 in lowercase: letters and 2–7, nothing a URL or a shell needs to escape.
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")

    static func newID() -> String {
        var bits = UInt64.random(in: 0..<(1 << 60))
        var id = ""
        for _ in 0..<12 {
            id.append(alphabet[Int(bits & 31)])
            bits >>= 5
        }
        return id
    }
}
