import Foundation
internal import GRDB

/// The audit log: one row per announcement from acceptance to outcome, and one per refusal.
///
/// An entry is open from ``opened(_:)`` until ``finished(id:reason:detail:at:)``; a daemon killed
/// in between leaves it open, and ``closeUnfinished(reason:detail:at:)`` gives it an outcome at the
/// next start. Each call is one transaction, durable when it returns. ``apply(_:)`` writes a batch
/// of changes in one transaction on the writer's own queue, so its caller's thread never waits
/// out the fsync.
public final class AuditLog: Sendable {
    private let storage: Storage

    init(storage: Storage) {
        self.storage = storage
    }

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
        try storage.write("record a refusal") { db in try Self.insert(Self.refusal(entry), db) }
    }

    /// Records refused requests in one transaction, on the writer's queue.
    public func refused(_ entries: [AuditEntry]) async throws(StateError) {
        try await storage.commitUnsynced("record a refusal") { db in
            for entry in entries { _ = try Self.insert(Self.refusal(entry), db) }
        }
    }

    /// Records when the newest open entry of announcement `id` started to sound.
    /// - Returns: false when no open entry has that id.
    @discardableResult
    public func started(id: String, at time: Date) throws(StateError) -> Bool {
        try storage.write("record a start") { db in try Self.apply(.started(id: id, at: time), db) }
    }

    /// Records the outcome of the newest open entry of announcement `id`; it is on disk when this returns.
    /// - Returns: false when no open entry has that id.
    @discardableResult
    public func finished(id: String, reason: String, detail: String?, at time: Date) throws(StateError) -> Bool {
        try storage.write("record an outcome") { db in
            try Self.apply(.finished(id: id, reason: reason, detail: detail, at: time), db)
        }
    }

    /// Counts one more repetition on the newest entry of announcement `id`.
    /// - Returns: false when no entry has that id.
    @discardableResult
    public func repeated(id: String) throws(StateError) -> Bool {
        try storage.write("record a repetition") { db in try Self.apply(.repeated(id: id), db) }
    }

    /// Writes `changes` in order, in one transaction (a group commit), on the database writer's
    /// own queue; they are on disk when this returns. The caller is suspended meanwhile, its
    /// thread free. A failure writes none of them.
    /// - Returns: how many inserted a row.
    @discardableResult
    public func apply(_ changes: [AuditChange]) async throws(StateError) -> Int {
        let result = await withCheckedContinuation { continuation in
            apply(changes) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// The same, without a caller that waits: `then` is called on the database writer's queue
    /// once the transaction has committed (they are on disk) or failed.
    public func apply(_ changes: [AuditChange], then: @escaping @Sendable (Result<Int, StateError>) -> Void) {
        guard !changes.isEmpty else { return then(.success(0)) }
        let folded = Self.folded(changes)
        storage.commitUnsynced(
            "record the audit log",
            { db in
                for change in folded { _ = try Self.apply(change, db) }
                return changes.count(where: \.opens)
            }, then: then)
    }

    /// `changes` with each `started`, `finished` and `repeated` of a row opened earlier in the
    /// same batch written into that row before it is inserted: one INSERT rather than an INSERT
    /// and an UPDATE each (an announcement dropped at once, `dropIfBusy`, is queued and finished
    /// in one batch). The rows after the commit are those the changes make one by one: a change
    /// goes into the newest row of its announcement opened in the batch only where its UPDATE
    /// would find that row (the newest open one for `started` and `finished`, the newest one for
    /// `repeated`); any other change keeps its place and runs as an UPDATE.
    static func folded(_ changes: [AuditChange]) -> [AuditChange] {
        var folded: [AuditChange?] = changes
        // Where in `folded` the newest row of each announcement opened in this batch is.
        var newest: [String: Int] = [:]
        for (index, change) in changes.enumerated() {
            let id: String
            switch change {
            case .opened(let entry):
                if let opened = entry.id { newest[opened] = index }
                continue
            case .started(let changed, _), .finished(let changed, _, _, _), .repeated(let changed):
                id = changed
            }
            guard let row = newest[id], case .opened(var entry) = folded[row] else { continue }
            let open = entry.reason == nil && entry.error == nil
            switch change {
            case .started(_, let time) where open:
                entry.started = time
            case .finished(_, let reason, let detail, let time) where open:
                entry.finished = time
                entry.reason = reason
                entry.detail = detail
            case .repeated:
                entry.repeats += 1
            default:
                continue
            }
            folded[row] = .opened(entry)
            folded[index] = nil
        }
        return folded.compactMap { $0 }
    }

    private static func refusal(_ entry: AuditEntry) -> AuditEntry {
        var entry = entry
        entry.error = entry.error ?? "refused"
        return entry
    }

    /// One change; false for an update that found no row.
    private static func apply(_ change: AuditChange, _ db: Database) throws -> Bool {
        switch change {
        case .opened(let entry):
            _ = try insert(entry, db)
            return true
        case .started(let id, let time):
            try db.cachedStatement(sql: "UPDATE audit SET started = ? WHERE \(newestOpen)")
                .execute(arguments: [time.storedMilliseconds, id])
        case .finished(let id, let reason, let detail, let time):
            try db.cachedStatement(sql: "UPDATE audit SET finished = ?, reason = ?, detail = ? WHERE \(newestOpen)")
                .execute(arguments: [time.storedMilliseconds, reason, detail, id])
        case .repeated(let id):
            try db.cachedStatement(
                sql:
                    "UPDATE audit SET repeats = repeats + 1 "
                    + "WHERE seq = (SELECT seq FROM audit WHERE id = ? ORDER BY seq DESC LIMIT 1)"
            ).execute(arguments: [id])
        }
        return db.changesCount > 0
    }

    /// Gives every open entry an outcome, at start, for announcements a killed daemon left unfinished.
    /// - Returns: the entries it closed, as they now are, oldest first.
    public func closeUnfinished(reason: String, detail: String, at time: Date) throws(StateError) -> [AuditEntry] {
        try storage.write("close unfinished audit entries") { db in
            try StoredRecord<AuditEntry>.fetchAll(
                db,
                sql: "UPDATE audit SET finished = ?, reason = ?, detail = ? WHERE \(Self.isOpen) RETURNING *",
                arguments: [time.storedMilliseconds, reason, detail]
            ).map(\.value).sorted { ($0.seq ?? 0) < ($1.seq ?? 0) }
        }
    }

    /// Reads entries that match `filter`, oldest first, after the `cursor` (a `seq`).
    /// - Parameters:
    ///   - filter: what to read.
    ///   - cursor: the `next` of the previous page, or nil for the first.
    ///   - limit: the most entries to return (at least 1).
    /// - Returns: the entries, and the cursor of the next page, nil when there is none.
    public func entries(_ filter: AuditFilter, after cursor: Int64?, limit: Int) async throws(StateError) -> (
        entries: [AuditEntry], next: Int64?
    ) {
        let limit = max(1, limit)
        typealias Columns = AuditEntry.Columns
        var request = StoredRecord<AuditEntry>.filter(Columns.seq > (cursor ?? 0))
        if let since = filter.since { request = request.filter(Columns.queued >= since.storedMilliseconds) }
        if let until = filter.until { request = request.filter(Columns.queued < until.storedMilliseconds) }
        if let output = filter.output { request = request.filter(Columns.output == output) }
        if let reason = filter.reason { request = request.filter(Columns.reason == reason || Columns.error == reason) }
        if let front = filter.front { request = request.filter(Columns.front == front) }
        if let id = filter.id { request = request.filter(Columns.id == id) }
        if let schedule = filter.schedule { request = request.filter(Columns.schedule == schedule) }
        if let refusals = filter.refusals {
            request = request.filter(refusals ? Columns.error != nil : Columns.error == nil)
        }
        if let text = filter.text {
            // LIKE with its wildcards escaped: the words as they are, anywhere in the text.
            let escaped = text.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
            request = request.filter(Columns.text.like("%" + escaped + "%", escape: "\\"))
        }
        let query = request.order(Columns.seq).limit(limit + 1)
        let rows = try await storage.read("read the audit log") { db in try query.fetchAll(db).map(\.value) }
        guard rows.count > limit else { return (rows, nil) }
        let page = Array(rows.prefix(limit))
        return (page, page.last?.seq)
    }

    /// Removes entries older than the retention's age and beyond its count; open entries stay.
    /// - Returns: how many entries were removed.
    @discardableResult
    public func prune(_ retention: AuditRetention, now: Date) throws(StateError) -> Int {
        try storage.write("prune the audit log") { db in try Self.prune(retention, now: now, db) }
    }

    /// Prunes as ``prune(_:now:)`` does, on the database writer's own queue.
    @discardableResult
    public func pruneOnWriter(_ retention: AuditRetention, now: Date) async throws(StateError) -> Int {
        try await storage.commitUnsynced("prune the audit log") { db in try Self.prune(retention, now: now, db) }
    }

    private static func prune(_ retention: AuditRetention, now: Date, _ db: Database) throws -> Int {
        var removed = 0
        if let maxAge = retention.maxAge {
            let age = maxAge.components
            let cutoff = now.addingTimeInterval(-(Double(age.seconds) + Double(age.attoseconds) / 1e18))
            try db.execute(
                sql: "DELETE FROM audit WHERE queued < ? AND NOT (\(Self.isOpen))",
                arguments: [cutoff.storedMilliseconds])
            removed += db.changesCount
        }
        // The newest `maxEntries` seqs are kept: a row below them goes unless it is still open.
        // The bound is read at the end of the table's b-tree and the delete walks only the rows
        // under it, so a prune costs the rows it removes. (A search by offset for the
        // `maxEntries`-th newest row stepped through that many index entries at every prune once
        // the log was full.) Where seqs have gaps (rows pruned by age), fewer rows than
        // `maxEntries` may stay, never more.
        let keep = max(0, retention.maxEntries)
        if let newest = try Int.fetchOne(db, sql: "SELECT max(seq) FROM audit"), newest > keep {
            try db.execute(
                sql: "DELETE FROM audit WHERE seq <= ? AND NOT (\(Self.isOpen))", arguments: [newest - keep])
            removed += db.changesCount
        }
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

    /// The bytes of the database's pages in use (not on the free list).
    static func bytesInUse(_ db: Database) throws -> Int {
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        let size = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
        return (pages - free) * size
    }

    /// The INSERT of a new row: every column of ``AuditEntry/CodingKeys`` but `seq`, which SQLite
    /// gives. It is prepared once per connection (GRDB's statement cache) and given the row's
    /// values in that order, which costs a fraction of a record's insert (its columns found and
    /// its SQL written at every call): the audit log writes one per announcement.
    private static let insertColumns = AuditEntry.CodingKeys.allCases.filter { $0 != .seq }
    private static let insertSQL =
        "INSERT INTO audit (" + insertColumns.map { "\"\($0.rawValue)\"" }.joined(separator: ", ") + ") VALUES ("
        + Array(repeating: "?", count: insertColumns.count).joined(separator: ", ") + ")"

    private static func insert(_ entry: AuditEntry, _ db: Database) throws -> Int64 {
        var row = entry
        row.queued = entry.queued ?? Date()
        // Callers pass nil for a private text already; dropping it here too keeps a slip in a
        // caller from writing it to disk.
        if entry.isPrivate { row.text = nil }
        try db.cachedStatement(sql: insertSQL).execute(arguments: StatementArguments(insertColumns.map(row.stored)))
        return db.lastInsertedRowID
    }
}

extension AuditEntry: StoredValue {
    static let databaseTableName = "audit"

    /// What is stored in `column`, as ``StoredRecord`` stores it (times as
    /// ``Foundation/Date/storedMilliseconds``).
    func stored(_ column: CodingKeys) -> (any DatabaseValueConvertible)? {
        switch column {
        case .seq: seq
        case .id: id
        case .front: front
        case .origin: origin
        case .output: output
        case .priority: priority
        case .queued: queued.storedMilliseconds
        case .started: started.storedMilliseconds
        case .finished: finished.storedMilliseconds
        case .reason: reason
        case .detail: detail
        case .error: error
        case .repeats: repeats
        case .schedule: schedule
        case .text: text
        case .isPrivate: isPrivate
        }
    }

    /// The columns the log filters on.
    enum Columns {
        static let seq = Column(CodingKeys.seq)
        static let id = Column(CodingKeys.id)
        static let front = Column(CodingKeys.front)
        static let output = Column(CodingKeys.output)
        static let queued = Column(CodingKeys.queued)
        static let reason = Column(CodingKeys.reason)
        static let error = Column(CodingKeys.error)
        static let schedule = Column(CodingKeys.schedule)
        static let text = Column(CodingKeys.text)
    }
}
