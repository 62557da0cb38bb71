import Foundation
import GRDB

@testable import SpeakState

/// A fresh directory under the system's temporary directory, removed when released.
final class TemporaryDirectory {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("speakstate-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The state directory the tests open, created by `StateDatabase` itself.
    var state: String { path + "/state" }

    /// The bytes of a file, or empty when it does not exist.
    func bytes(_ name: String) -> Data {
        FileManager.default.contents(atPath: state + "/" + name) ?? Data()
    }
}

// Tests look at the file with SQL of their own, through the store's one connection pool.
extension StateDatabase {
    func scalar(_ sql: String) throws -> Int {
        try storage.writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: sql) ?? -1 }
    }

    func appliedMigrations() throws -> [String] {
        try storage.writer.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
    }
}

extension Data {
    func contains(_ text: String) -> Bool {
        range(of: Data(text.utf8)) != nil
    }
}

/// A fixed point in time, whole milliseconds, so stored times compare equal.
let t0 = Date(timeIntervalSince1970: 1_790_000_000.125)

func entry(
    _ id: String?, front: String = "http", output: String? = "default", queued: Date = t0, text: String? = "hello",
    isPrivate: Bool = false
) -> AuditEntry {
    AuditEntry(
        id: id, front: front, origin: "unix uid=1000", output: output, priority: "normal", queued: queued, text: text,
        isPrivate: isPrivate)
}
