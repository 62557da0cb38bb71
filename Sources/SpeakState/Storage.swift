import Foundation
internal import GRDB

/// The one database writer that every store reads and writes through (the file's pool, or an
/// in-memory queue in tests), and the file its errors name.
///
/// `write` and `read` block the calling thread for one SQLite transaction (a commit waits for its
/// fsync); from async code both suspend the caller instead, and the transaction runs on GRDB's
/// writer queue or a reader's, so no cooperative thread waits for SQLite or the disk. `commitUnsynced` is the audit
/// log's: it runs the transaction on the writer's own queue and suspends the caller meanwhile, and its commit is in the operating system's hands when it
/// returns, so it survives the death of the process (`kill -9`, a crash) without waiting for the
/// disk; `syncer` puts it on the disk within about a second, so a power cut loses at most that
/// second.
struct Storage: Sendable {
    let writer: any DatabaseWriter
    let path: String
    /// Syncs what `commitUnsynced` wrote; nil for a database with no file (tests).
    let syncer: WALSyncer?

    init(writer: any DatabaseWriter, path: String, syncer: WALSyncer? = nil) {
        self.writer = writer
        self.path = path
        self.syncer = syncer
    }

    func write<T>(_ operation: String, _ body: (Database) throws -> T) throws(StateError) -> T {
        try naming(operation) { try writer.write(body) }
    }

    /// Runs `body` in one transaction on the writer's own queue (GRDB's asynchronous `write`),
    /// the caller suspended meanwhile: the commit's fsync (`synchronous = FULL`) waits there, not
    /// on a cooperative thread. It is on disk when this returns.
    func write<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (Database) throws -> T)
        async throws(StateError) -> T
    {
        try await naming(operation) { try await writer.write(body) }
    }

    /// Runs `body` in one transaction on the writer's queue with `synchronous = NORMAL`: the WAL
    /// is written, not synced, so the caller waits for no disk flush; the commit survives a
    /// `kill -9` at once, and a power cut once `syncer` has run (about a second).
    func commitUnsynced<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (Database) throws -> T)
        async throws(StateError) -> T
    {
        let result = await withCheckedContinuation { continuation in
            commitUnsynced(operation, body) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// The same, without a caller that waits: the transaction is queued on the writer (GRDB's
    /// `asyncWriteWithoutTransaction`) and `then` is called on the writer's queue once it has
    /// committed or failed. Nothing hops back to a task between a write and what follows it, so
    /// the audit log's group commits cost no thread switch beyond the writer's own.
    func commitUnsynced<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (Database) throws -> T,
        then: @escaping @Sendable (Result<T, StateError>) -> Void
    ) {
        writer.asyncWriteWithoutTransaction { [path, syncer] db in
            let result: Result<T, StateError>
            do {
                // Prepared once per connection, as the batch's own statements are.
                try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute()
                defer { try? db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute() }
                try db.beginTransaction()
                do {
                    let value = try body(db)
                    try db.commit()
                    result = .success(value)
                } catch {
                    try? db.rollback()
                    throw error
                }
                syncer?.wrote()
            } catch {
                result = .failure(StateError(error, path: path, operation: operation))
            }
            then(result)
        }
    }

    func read<T>(_ operation: String, _ body: (Database) throws -> T) throws(StateError) -> T {
        try naming(operation) { try writer.read(body) }
    }

    /// Runs `body` in one read transaction on one of the database's reader connections, the
    /// caller suspended meanwhile: no cooperative thread waits on SQLite.
    func read<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (Database) throws -> T)
        async throws(StateError) -> T
    {
        try await naming(operation) { try await writer.read(body) }
    }

    /// `body`'s result, or its error as a ``StateError`` naming `operation` and the file.
    private func naming<T>(_ operation: String, _ body: () throws -> T) throws(StateError) -> T {
        do {
            return try body()
        } catch {
            throw StateError(error, path: path, operation: operation)
        }
    }

    /// `body`'s result, or its error as a ``StateError`` naming `operation` and the file.
    private func naming<T>(_ operation: String, _ body: () async throws -> T) async throws(StateError) -> T {
        do {
            return try await body()
        } catch {
            throw StateError(error, path: path, operation: operation)
        }
    }
}

// Times are stored as INTEGER milliseconds since 1970 UTC: exact, compact, ordered, and easy to
// read in the sqlite3 shell (`datetime(queued / 1000, 'unixepoch')`). What is read back is
// rounded to the millisecond.
extension Date {
    var storedMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    init(storedMilliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(storedMilliseconds) / 1000)
    }
}

extension Optional where Wrapped == Date {
    var storedMilliseconds: Int64? { map(\.storedMilliseconds) }
}

/// Records store their dates as ``Date/storedMilliseconds``.
protocol MillisecondDates: FetchableRecord, EncodableRecord {}

extension MillisecondDates {
    static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .custom { $0.storedMilliseconds }
    }

    static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .custom { value in Int64.fromDatabaseValue(value).map(Date.init(storedMilliseconds:)) }
    }
}
