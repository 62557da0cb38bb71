import Foundation
internal import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// speakd's embedded database: the audit log, stored schedules and the fleet's request ids, in one SQLite file.
///
/// The file is opened in WAL mode with `synchronous = FULL`, so a schedule or a request id whose
/// call has returned is on disk and survives a power cut, and with `secure_delete = ON`, so
/// deleted rows are overwritten. Every call runs one short transaction. The audit log's batches
/// run on the writer's own queue (``AuditLog/apply(_:)``) without waiting for a disk flush: they
/// survive a `kill -9` when they return, and a power cut about a second later (`WALSyncer`). The
/// other calls block their thread until they commit.
public final class StateDatabase: Sendable {
    /// The file's name inside the state directory.
    public static let fileName = "speakd.sqlite"

    /// The database file: the state directory followed by ``fileName``.
    public let path: String
    /// One row per announcement outcome and per refusal.
    public let audit: AuditLog
    /// Schedules created through the API, and the last slot each one fired.
    public let schedules: ScheduleStore
    /// MQTT request ids seen recently, with the default capacity.
    public let fleetRequests: FleetRequestMemory

    let storage: Storage

    /// Opens the database in `directory`, creating the directory (mode 0700) and the file (mode
    /// 0600) when missing.
    ///
    /// The directory must be speakd's user's and not writable by its group or others, and the
    /// file is never a symbolic link (``StateError/Kind/unsafe``). Only the last component of `directory` is created. The schema is brought up to date and the
    /// file's integrity checked (`PRAGMA quick_check`).
    /// - Parameter directory: the state directory, such as `/var/lib/speakd`.
    /// - Throws: ``StateError`` of kind ``StateError/Kind/corrupt`` for a file that is not a database
    ///   or is damaged, ``StateError/Kind/inaccessible`` when it cannot be created or written,
    ///   ``StateError/Kind/newerSchema`` when a newer speakd wrote it. The file is never moved or
    ///   replaced: what to do is the operator's decision, and the error says how.
    public convenience init(directory: String) throws(StateError) {
        try self.init(directory: directory, schema: SchemaMigration.all)
    }

    /// Opens the database with a given list of schema versions, so tests can add one.
    convenience init(directory: String, schema: [SchemaMigration]) throws(StateError) {
        let directory = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        let path = directory + "/" + Self.fileName
        try Self.makeDirectory(directory)
        try Self.createFile(path)
        self.init(storage: try Self.open(path: path, schema: schema))
    }

    /// A database over `writer`, such as an in-memory `DatabaseQueue` in tests, its schema brought
    /// up to date; `path` names it in errors.
    convenience init(writer: any DatabaseWriter, path: String = ":memory:") throws(StateError) {
        do {
            try SchemaMigration.migrator(SchemaMigration.all).migrate(writer)
        } catch {
            throw StateError(error, path: path, operation: "open")
        }
        self.init(storage: Storage(writer: writer, path: path))
    }

    /// The stores over one opened database.
    private init(storage: Storage) {
        self.storage = storage
        path = storage.path
        audit = AuditLog(storage: storage)
        schedules = ScheduleStore(storage: storage)
        fleetRequests = FleetRequestMemory(storage: storage, capacity: FleetRequestMemory.defaultCapacity)
    }

    /// Creates the state directory (mode 0700) when missing; an existing one is used only when
    /// speakd's user owns it and neither its group nor others may write to it, since whoever can
    /// write there can replace the database or plant a link in its place.
    private static func makeDirectory(_ directory: String) throws(StateError) {
        let created = mkdir(directory, 0o700) == 0
        let error = errno
        var status = stat()
        guard stat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            let message = created || error == EEXIST ? "not a directory" : String(cString: strerror(error))
            throw StateError(.inaccessible, path: directory, operation: "create the state directory", message: message)
        }
        if status.st_uid != geteuid() {
            throw StateError(
                .unsafe, path: directory, operation: "use the state directory",
                message: "it is owned by uid \(status.st_uid), not by speakd's user (uid \(geteuid()))")
        }
        if status.st_mode & 0o022 != 0 {
            throw StateError(
                .unsafe, path: directory, operation: "use the state directory",
                message: "its mode \(String(status.st_mode & 0o7777, radix: 8)) lets "
                    + (status.st_mode & 0o002 != 0 ? "every user" : "its group") + " write to it")
        }
    }

    /// Creates the database file readable and writable by speakd's user only (0600; SQLite gives
    /// its `-wal` and `-shm` files the same mode), opening it without following a symbolic link;
    /// a link at the file, its `-wal` or its `-shm` is refused, so nothing outside the directory
    /// is ever created, written or deleted through one. The directory is speakd's own and closed
    /// to others (`makeDirectory`), so no one else can put a link there between this check and
    /// SQLite's open.
    private static func createFile(_ path: String) throws(StateError) {
        for file in [path + "-wal", path + "-shm"] {
            var status = stat()
            if lstat(file, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
                throw StateError(
                    .unsafe, path: file, operation: "open",
                    message: status.st_mode & S_IFMT == S_IFLNK ? "it is a symbolic link" : "it is not a regular file")
            }
        }
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else {
            let error = errno
            throw StateError(
                error == ELOOP ? .unsafe : .inaccessible, path: path, operation: "open",
                message: error == ELOOP ? "it is a symbolic link" : String(cString: strerror(error)))
        }
        defer { Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw StateError(.unsafe, path: path, operation: "open", message: "it is not a regular file")
        }
    }

    private static func open(path: String, schema: [SchemaMigration]) throws(StateError) -> Storage {
        var configuration = Configuration()
        configuration.label = "speakd.state"
        // Another process (the sqlite3 shell, a backup) may hold a lock for a moment.
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // Deleted rows (pruned audit entries, forgotten schedules) are overwritten, not left in free pages.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw StateError(error, path: path, operation: "open")
        }
        let migrator = SchemaMigration.migrator(schema)
        do {
            try pool.writeWithoutTransaction { db in
                // GRDB sets `synchronous = NORMAL` on the writer when it turns WAL on, after
                // prepareDatabase has run: with NORMAL a power cut can lose the last commits, so FULL
                // is set here, on the one connection that writes.
                try db.execute(sql: "PRAGMA synchronous = FULL")
                // A checkpoint leaves the WAL file at its largest size; this trims it afterwards.
                try db.execute(sql: "PRAGMA journal_size_limit = 4194304")
                // No checkpoint on the writer: `WALSyncer` checkpoints beside it. SQLite's own,
                // past 1,000 pages of WAL, ran after every commit while a busy writer kept the
                // WAL from being started again, and flushed the disk twice each time.
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
                let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
                if check != ["ok"] {
                    throw StateError(
                        .corrupt, path: path, operation: "open",
                        message: "integrity check failed: " + (check.first ?? "no result"))
                }
                if try migrator.hasBeenSuperseded(db) {
                    let unknown = try migrator.appliedIdentifiers(db).subtracting(schema.map(\.identifier))
                    throw StateError(
                        .newerSchema, path: path, operation: "open",
                        message: "unknown schema versions " + unknown.sorted().joined(separator: ", "))
                }
            }
            try migrator.migrate(pool)
        } catch {
            throw StateError(error, path: path, operation: "open")
        }
        do {
            return Storage(writer: pool, path: path, syncer: try WALSyncer(path: path))
        } catch {
            throw StateError(error, path: path, operation: "open")
        }
    }
}
