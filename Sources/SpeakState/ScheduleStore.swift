import Foundation
internal import GRDB

/// A schedule as stored: its definition is opaque here, owned by the scheduler.
public struct StoredSchedule: Codable, Sendable, Equatable {
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

    /// The stored columns.
    enum CodingKeys: String, CodingKey, ColumnExpression {
        case id, definition, created, updated, lastSlot
    }
}

extension StoredSchedule: StoredValue {
    static let databaseTableName = "schedule"

    /// The columns are the coding keys (``StoredRecord`` stores the fields under them).
    typealias Columns = CodingKeys
}

/// What the planner keeps of a stored schedule: its definition without its announcement, so the
/// daemon's memory does not grow with the texts it stores.
public struct StoredPlan: Codable, Sendable, Equatable {
    /// The schedule's id.
    public var id: String
    /// The schedule's canonical JSON without its `announcement` key.
    public var plan: Data
    /// The last slot fired or skipped.
    public var lastSlot: Date?
    /// When the definition was last written (created or changed).
    public var updated: Date

    /// The columns it is read from, `plan` made by SQLite.
    enum CodingKeys: String, CodingKey {
        case id, plan, lastSlot, updated
    }
}

/// Read from the schedule table, its `plan` made by SQLite from the definition (``ScheduleStore/plans()``).
extension StoredPlan: StoredValue {
    static let databaseTableName = StoredSchedule.databaseTableName
}

/// How much the stored schedules may take together: a write that would pass it is not made.
public struct ScheduleRoom: Sendable, Equatable {
    /// The most schedules kept.
    public var schedules: Int
    /// The most bytes their definitions take together.
    public var bytes: Int

    /// Room for `schedules` schedules of `bytes` bytes together; unbounded by default.
    public init(schedules: Int = .max, bytes: Int = .max) {
        self.schedules = schedules
        self.bytes = bytes
    }

    /// Whether `count` stored schedules taking `used` bytes leave room for a definition of `adding`
    /// bytes, replacing one of `replacing` bytes (nil for a new schedule).
    public func fits(count: Int, used: Int, adding: Int, replacing: Int?) -> Bool {
        (replacing != nil || count < schedules) && used - (replacing ?? 0) + adding <= bytes
    }
}

/// What an insert or update within a ``ScheduleRoom`` did.
public enum ScheduleWrite: Sendable, Equatable {
    /// Written: the schedule as now stored.
    case stored(StoredSchedule)
    /// Nothing written: the id an insert names is taken, or the schedule an update names is gone.
    case unchanged
    /// Nothing written: there is no room for it beside the `count` schedules stored, whose
    /// definitions take `bytes` together (without the one an update replaces).
    case full(count: Int, bytes: Int)

    /// The schedule written, or nil.
    public var stored: StoredSchedule? {
        if case .stored(let schedule) = self { schedule } else { nil }
    }
}

/// The schedules created through the API, so they outlive a restart, and how far each has fired.
///
/// Every write is durable when it returns (`synchronous = FULL`): a schedule answered as created,
/// and a slot marked as fired, outlive a power cut. Writes run on the database's writer queue,
/// their callers suspended: no cooperative thread waits for the disk.
public final class ScheduleStore: Sendable {
    private typealias Record = StoredRecord<StoredSchedule>
    private typealias Columns = StoredSchedule.Columns
    private let storage: Storage

    init(storage: Storage) {
        self.storage = storage
    }

    /// Oldest first; the id orders schedules created in the same millisecond.
    private static let ordered = Record.order(Columns.created, Columns.id)

    /// Stores a new schedule under a fresh id.
    public func insert(definition: Data, now: Date) async throws(StateError) -> StoredSchedule {
        try await insert(definition: definition, now: now, id: nil).stored!
    }

    /// Stores a new schedule under `id` (one a fleet names, so that every kiosk knows it by the
    /// same id), or under a new random one when `id` is nil, if it fits in `room`. The count,
    /// the check and the insert are one transaction, so two requests at once cannot both take
    /// the last room.
    /// - Returns: the schedule as stored; `unchanged` when `id` is taken; `full` when it does not fit.
    public func insert(
        definition: Data, now: Date, id given: String?, within room: ScheduleRoom = ScheduleRoom()
    ) async throws(StateError) -> ScheduleWrite {
        try await storage.write("store a schedule") { db in
            if let given, try Record.exists(db, key: given) { return .unchanged }
            let (count, used) = try Self.usage(db)
            guard room.fits(count: count, used: used, adding: definition.count, replacing: nil) else {
                return .full(count: count, bytes: used)
            }
            // 60 random bits make a clash unlikely; a clash draws again rather than overwrite.
            var id = given ?? Self.newID()
            while given == nil, try Record.exists(db, key: id) { id = Self.newID() }
            let stored = Date(storedMilliseconds: now.storedMilliseconds)
            var record = Record(StoredSchedule(id: id, definition: definition, created: stored, updated: stored))
            try record.insert(db)
            return .stored(record.value)
        }
    }

    /// Every stored schedule, oldest first.
    public func all() async throws(StateError) -> [StoredSchedule] {
        try await storage.read("read the schedules") { db in try Self.ordered.fetchAll(db).map(\.value) }
    }

    /// A page of schedules in the order `all()` gives, after `cursor` (the `next` of the page
    /// before, nil for the first), at most `limit` of them; only those that match `text` and `paused`
    /// when given, so that the cursor pages within the filtered list.
    /// - Parameters:
    ///   - text: matched, case-insensitively, as a substring of the id, the `name`, or a `text` or
    ///     `ssml` anywhere in the `announcement` (its spans and sequence too); nil or empty matches all.
    ///   - paused: only paused schedules when true, only active ones when false; nil for both.
    /// - Returns: the page, and the cursor of the next one when there are more.
    public func page(after cursor: String?, limit: Int, matching text: String? = nil, paused: Bool? = nil)
        async throws(StateError) -> (schedules: [StoredSchedule], next: String?)
    {
        var request = Self.ordered.limit(limit + 1)
        if let text, !text.isEmpty { request = request.filter(Self.matching(text.lowercased())) }
        if let paused { request = request.filter(Self.pausedValue == paused) }
        if let cursor, let (created, id) = Self.parse(cursor: cursor) {
            request = request.filter(Columns.created > created || (Columns.created == created && Columns.id > id))
        }
        var rows = try await storage.read("read the schedules") { [request] db in try request.fetchAll(db).map(\.value)
        }
        guard rows.count > limit else { return (rows, nil) }
        rows.removeLast()
        return (rows, rows.last.map(Self.cursor))
    }

    /// The definition's `paused`, 0 or 1 (false when it has none): SQLite reads it from the stored
    /// JSON, so no definition is decoded to filter.
    private static let pausedValue = SQL(
        "coalesce(json_extract(CAST(\(Columns.definition) AS TEXT), '$.paused'), 0)")

    /// Whether a schedule's id, name, or a text of its announcement contains `needle` (lowercase).
    /// SQLite walks the stored JSON row by row (`json_tree`), so the texts are never read into
    /// memory together; Swift's `lowercased()`, which GRDB gives SQLite, folds more than ASCII.
    private static func matching(_ needle: String) -> SQL {
        let definition = SQL("CAST(\(Columns.definition) AS TEXT)")
        let lower = DatabaseFunction.lowercase.name
        return SQL(
            """
            (instr(\(sql: lower)(\(Columns.id)), \(needle)) > 0
            OR instr(\(sql: lower)(coalesce(json_extract(\(definition), '$.name'), '')), \(needle)) > 0
            OR EXISTS (SELECT 1 FROM json_tree(\(definition), '$.announcement')
                WHERE key IN ('text', 'ssml') AND type = 'text'
                AND instr(\(sql: lower)(value), \(needle)) > 0))
            """)
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
    public func plans() async throws(StateError) -> [StoredPlan] {
        try await storage.read("read the schedules") { db in
            let plan = SQL("json_remove(CAST(\(Columns.definition) AS TEXT), '$.announcement')")
            return try Self.ordered
                .select(
                    Columns.id, plan.forKey(StoredPlan.CodingKeys.plan.stringValue), Columns.lastSlot, Columns.updated
                )
                .asRequest(of: StoredRecord<StoredPlan>.self).fetchAll(db).map(\.value)
        }
    }

    /// How many schedules are stored, and the bytes of their definitions together.
    public func usage() async throws(StateError) -> (count: Int, bytes: Int) {
        try await storage.read("count the schedules") { db in try Self.usage(db) }
    }

    private static func usage(_ db: Database) throws -> (count: Int, bytes: Int) {
        let count = try Record.fetchCount(db)
        let bytes = try Record.select(sum(length(Columns.definition)), as: Int.self).fetchOne(db)
        return (count, bytes ?? 0)
    }

    /// The schedule with this id, or nil.
    public func get(id: String) async throws(StateError) -> StoredSchedule? {
        try await storage.read("read a schedule") { db in try Record.fetchOne(db, key: id)?.value }
    }

    /// Replaces a schedule's definition, if the new one fits in `room` in its place; its id,
    /// creation time and last slot stay. The check and the write are one transaction.
    /// - Returns: the schedule as now stored; `unchanged` when there is none with this id; `full`
    ///   when it does not fit.
    @discardableResult
    public func update(
        id: String, definition: Data, now: Date, within room: ScheduleRoom = ScheduleRoom()
    ) async throws(StateError) -> ScheduleWrite {
        try await storage.write("update a schedule") { db in
            guard let old = try Record.fetchOne(db, key: id)?.value else { return .unchanged }
            let (count, used) = try Self.usage(db)
            let replacing = old.definition.count
            guard room.fits(count: count, used: used, adding: definition.count, replacing: replacing) else {
                return .full(count: count, bytes: used - replacing)
            }
            try Record.filter(key: id).updateAll(
                db, Columns.definition.set(to: definition), Columns.updated.set(to: now.storedMilliseconds))
            return try Record.fetchOne(db, key: id).map { .stored($0.value) } ?? .unchanged
        }
    }

    /// Deletes a schedule.
    /// - Returns: false when there was none with this id.
    @discardableResult
    public func delete(id: String) async throws(StateError) -> Bool {
        try await storage.write("delete a schedule") { db in try Record.deleteOne(db, key: id) }
    }

    /// Records that `slot` fired or was skipped; a slot earlier than the one recorded changes nothing.
    ///
    /// On disk when it returns, so a restart never fires the slot again.
    /// - Returns: false when there is no schedule with this id.
    @discardableResult
    public func markSlot(id: String, slot: Date) async throws(StateError) -> Bool {
        try await storage.write("record a schedule slot") { db in
            // SQLite's max() of a NULL is NULL, hence the coalesce for a schedule that never fired.
            let slot = slot.storedMilliseconds
            let latest = SQL("max(coalesce(\(Columns.lastSlot), \(slot)), \(slot))")
            return try Record.filter(key: id).updateAll(db, Columns.lastSlot.set(to: latest)) > 0
        }
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
