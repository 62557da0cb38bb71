import Foundation
import GRDB
import Testing

@testable import SpeakState

@Suite struct StateDatabaseTests {
    @Test func newFileIsMigratedDurableAndPrivate() throws {
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        #expect(db.path == dir.state + "/speakd.sqlite")
        #expect(FileManager.default.fileExists(atPath: db.path))
        #expect(try db.appliedMigrations() == ["v1", "v2"])
        #expect(try db.scalar("PRAGMA synchronous") == 2)  // FULL
        // The writer never checkpoints (WALSyncer does, beside it).
        #expect(try db.scalar("PRAGMA wal_autocheckpoint") == 0)
        #expect(try db.scalar("PRAGMA secure_delete") == 1)
        #expect(FileManager.default.fileExists(atPath: db.path + "-wal"))
        let mode = try FileManager.default.attributesOfItem(atPath: dir.state)[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }

    @Test func reopeningKeepsData() async throws {
        let dir = TemporaryDirectory()
        do {
            let db = try StateDatabase(directory: dir.state)
            try db.audit.opened(entry("a1"))
            _ = try await db.schedules.insert(definition: Data("{}".utf8), now: t0)
            #expect(try await db.fleetRequests.claim("r1", at: t0) == nil)
            try db.close()
        }
        let db = try StateDatabase(directory: dir.state + "/")
        #expect(try await db.audit.entries(AuditFilter(), after: nil, limit: 10).entries.map(\.id) == ["a1"])
        #expect(try await db.schedules.all().count == 1)
        #expect(try await db.fleetRequests.claim("r1", at: t0) != nil)
        #expect(try db.appliedMigrations() == ["v1", "v2"])
    }

    /// A file of the first schema is brought to the current one with its rows, and an
    /// announcement left open in it still gets its outcome through the index of open ids.
    @Test func firstSchemaFileIsMigratedWithItsOpenRows() async throws {
        let dir = TemporaryDirectory()
        do {
            let db = try StateDatabase(directory: dir.state, schema: [SchemaMigration.v1])
            try db.audit.opened(entry("a1"))
            try db.audit.opened(entry("a2"))
            try db.close()
        }
        let db = try StateDatabase(directory: dir.state)
        #expect(try db.appliedMigrations() == ["v1", "v2"])
        #expect(try db.audit.finished(id: "a1", reason: "completed", detail: nil, at: t0))
        #expect(try db.audit.repeated(id: "a1"))
        let rows = try await db.audit.entries(AuditFilter(), after: nil, limit: 10).entries
        #expect(rows.map(\.reason) == ["completed", nil])
        #expect(rows.map(\.repeats) == [1, 0])
        #expect(try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'audit_id'") == 0)
    }

    @Test func laterSchemaVersionKeepsRowsAndOlderCodeRefusesIt() async throws {
        let dir = TemporaryDirectory()
        do {
            let db = try StateDatabase(directory: dir.state)
            try db.audit.opened(entry("a1"))
            try db.close()
        }
        let v3 = SchemaMigration(
            identifier: "v3", sql: "ALTER TABLE audit ADD COLUMN voice TEXT; CREATE INDEX audit_voice ON audit(voice)")
        do {
            let db = try StateDatabase(directory: dir.state, schema: SchemaMigration.all + [v3])
            #expect(try db.appliedMigrations() == ["v1", "v2", "v3"])
            #expect(try await db.audit.entries(AuditFilter(), after: nil, limit: 10).entries.map(\.id) == ["a1"])
            #expect(try db.scalar("SELECT count(*) FROM pragma_table_info('audit') WHERE name = 'voice'") == 1)
            try db.close()
        }
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .newerSchema)
        #expect(error?.isUnusable == true)
        #expect(error?.description.contains(dir.state + "/speakd.sqlite") == true)
        #expect(error?.description.contains("newer speakd") == true)
    }

    @Test func garbageFileIsRefusedByName() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.state, withIntermediateDirectories: false)
        let path = dir.state + "/speakd.sqlite"
        let garbage = Data(String(repeating: "this is not a database, only words. ", count: 300).utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: garbage))
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .corrupt)
        #expect(error?.path == path)
        #expect(
            error?.description
                == "the state database \(path) cannot be used (file is not a database): move it aside and speakd "
                + "starts with a new one, or restore it from a backup")
        // Never moved aside or replaced.
        #expect(FileManager.default.contents(atPath: path) == garbage)
    }

    /// A database with enough rows to span many pages, closed so everything is in the main file.
    private func filledDatabase(_ dir: TemporaryDirectory) throws -> String {
        let db = try StateDatabase(directory: dir.state)
        for n in 0..<400 {
            try db.audit.opened(entry("a\(n)", text: String(repeating: "words \(n) ", count: 40)))
        }
        try db.close()
        #expect(!FileManager.default.fileExists(atPath: db.path + "-wal"))
        return db.path
    }

    @Test func truncatedDatabaseIsRefusedByName() throws {
        let dir = TemporaryDirectory()
        let path = try filledDatabase(dir)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size / 2)
        try handle.close()
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .corrupt)
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains("move it aside") == true)
    }

    @Test func overwrittenPagesAreRefusedByName() throws {
        let dir = TemporaryDirectory()
        let path = try filledDatabase(dir)
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        // Keep the header (page 1) intact, so SQLite sees a database and has to look inside.
        for offset in stride(from: UInt64(4096), to: size, by: 3 * 4096) {
            try handle.seek(toOffset: offset + 100)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 600))
        }
        try handle.close()
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .corrupt)
        #expect(error?.description.contains(path) == true)
    }

    @Test func missingParentIsNotCreated() throws {
        let dir = TemporaryDirectory()
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.path + "/no/such") }
        #expect(error?.kind == .inaccessible)
        #expect(error?.path == dir.path + "/no/such")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/no"))
    }

    @Test func stateDirectoryThatIsAFileIsRefused() throws {
        let dir = TemporaryDirectory()
        #expect(FileManager.default.createFile(atPath: dir.state, contents: Data("x".utf8)))
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .inaccessible)
        #expect(error?.message == "not a directory")
    }

    /// A state directory others may write to, or that another user owns, is refused with a
    /// message naming it; nothing is created in it.
    @Test(arguments: [0o777, 0o770, 0o702])
    func anOpenStateDirectoryIsRefused(mode: Int) throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.state, withIntermediateDirectories: false)
        #expect(chmod(dir.state, mode_t(mode)) == 0)
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .unsafe && error?.isUnusable == true)
        #expect(error?.path == dir.state)
        #expect("\(error.map { "\($0)" } ?? "")".contains(dir.state), "\(String(describing: error))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.state).isEmpty)
    }

    @Test func aForeignStateDirectoryIsRefused() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.state, withIntermediateDirectories: false)
        chmod(dir.state, 0o700)
        // Given to another user, as root can (the tests run as root in CI); otherwise it is
        // already another user's view of a directory this one does not own: skip.
        guard geteuid() == 0 else { return }
        #expect(chown(dir.state, 65_534, 65_534) == 0)
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .unsafe)
        #expect(error?.message.contains("uid 65534") == true, "\(String(describing: error))")
        #expect("\(error.map { "\($0)" } ?? "")".contains(dir.state))
    }

    /// A symbolic link at the database file, dangling or to a file, is refused: nothing is
    /// created at its target, and no `-wal` beside the target is touched.
    @Test(arguments: ["dangling", "file"])
    func aSymlinkedDatabaseIsRefused(kind: String) throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.state, withIntermediateDirectories: false)
        chmod(dir.state, 0o700)
        let target = dir.path + "/target"
        if kind == "file" {
            FileManager.default.createFile(atPath: target, contents: Data("not a database".utf8))
            FileManager.default.createFile(atPath: target + "-wal", contents: Data("keep".utf8))
        }
        try FileManager.default.createSymbolicLink(
            atPath: dir.state + "/" + StateDatabase.fileName, withDestinationPath: target)
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .unsafe && error?.message == "it is a symbolic link", "\(String(describing: error))")
        #expect(error?.path == dir.state + "/" + StateDatabase.fileName)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(left == (kind == "file" ? ["state", "target", "target-wal"] : ["state"]))
        if kind == "file" {
            #expect(FileManager.default.contents(atPath: target + "-wal") == Data("keep".utf8))
            #expect(FileManager.default.contents(atPath: target) == Data("not a database".utf8))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.state) == [StateDatabase.fileName])
    }

    @Test(arguments: ["-wal", "-shm"])
    func aSymlinkedWALOrSharedMemoryFileIsRefused(suffix: String) throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.state, withIntermediateDirectories: false)
        chmod(dir.state, 0o700)
        let link = dir.state + "/" + StateDatabase.fileName + suffix
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: dir.path + "/target")
        let error = #expect(throws: StateError.self) { try StateDatabase(directory: dir.state) }
        #expect(error?.kind == .unsafe && error?.path == link, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/target"))
    }

    /// The database and its `-wal` and `-shm` are speakd's user's alone, whatever the umask
    /// (the tests' is 022, which gave 0644).
    @Test func newDatabaseFilesAre0600() throws {
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        try db.audit.opened(entry("one"))
        for suffix in ["", "-wal", "-shm"] {
            let mode = try FileManager.default.attributesOfItem(atPath: db.path + suffix)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(suffix): \(String(mode ?? 0, radix: 8))")
        }
    }

    /// A power cut leaves the database file and its WAL as they are on disk: opening copies of them
    /// taken while the pool is open, in the middle of an uncommitted transaction that has already
    /// spilled pages to the WAL, must show every committed row and none of the uncommitted ones.
    @Test func committedRowsSurviveACrash() async throws {
        let dir = TemporaryDirectory()
        let crash = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        for n in 0..<250 {
            try db.audit.opened(entry("committed-\(n)"))
            if n % 50 == 0 { try db.audit.finished(id: "committed-\(n)", reason: "completed", detail: nil, at: t0) }
        }
        try FileManager.default.createDirectory(atPath: crash.state, withIntermediateDirectories: false)
        // Copied from inside the open transaction; a synchronous function, so the blocking write is called.
        func copyMidTransaction() throws {
            try db.storage.writer.writeWithoutTransaction { conn in
                // A tiny page cache makes SQLite write the open transaction's pages to the WAL before commit.
                try conn.execute(sql: "PRAGMA cache_size = 10")
                try conn.inTransaction {
                    for n in 0..<300 {
                        try conn.execute(
                            sql: "INSERT INTO audit (id, front, origin, queued, text) VALUES (?, 'http', 'x', 0, ?)",
                            arguments: ["uncommitted-\(n)", String(repeating: "u", count: 2000)])
                    }
                    for name in ["speakd.sqlite", "speakd.sqlite-wal"] {
                        try FileManager.default.copyItem(
                            atPath: dir.state + "/" + name, toPath: crash.state + "/" + name)
                    }
                    return .rollback
                }
                try conn.execute(sql: "PRAGMA cache_size = -2000")
            }
        }
        try copyMidTransaction()
        #expect(crash.bytes("speakd.sqlite-wal").contains("uncommitted-10"))

        let recovered = try StateDatabase(directory: crash.state)
        let rows = try await recovered.audit.entries(AuditFilter(), after: nil, limit: 1000).entries
        #expect(rows.count == 250)
        #expect(rows.allSatisfy { $0.id?.hasPrefix("committed-") == true })
        #expect(rows.filter { $0.reason == "completed" }.count == 5)
    }

    @Test func fullDiskIsAnErrorTheCallerCanRead() async throws {
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        let pages = try db.scalar("PRAGMA page_count")
        // What a full file system does to SQLite: no page past this one can be allocated.
        _ = try db.scalar("PRAGMA max_page_count = \(pages + 3)")
        var caught: StateError?
        for n in 0..<200 {
            do {
                try db.audit.opened(entry("a\(n)", text: String(repeating: "x", count: 3000)))
            } catch {
                caught = error
                break
            }
        }
        let error = try #require(caught)
        #expect(error.isDiskFull)
        #expect(error.kind == .diskFull)
        #expect(error.resultCode == 13)
        #expect(!error.isUnusable)
        #expect(error.description.contains(db.path))
        #expect(error.description.contains("disk is full"))
        #expect(StateError.Kind.diskFull ~= error)

        // Once space is back, writes work again on the same pool.
        _ = try db.scalar("PRAGMA max_page_count = 1073741823")
        try db.audit.opened(entry("after"))
        #expect(try await db.audit.entries(AuditFilter(id: "after"), after: nil, limit: 1).entries.count == 1)
    }
}
