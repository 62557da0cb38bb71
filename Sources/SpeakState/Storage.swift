import Foundation
internal import GRDB

/// The one connection pool that every store reads and writes through, and the file its errors name.
///
/// Calls block the calling thread for one SQLite transaction (a commit waits for its fsync).
struct Storage: Sendable {
    let pool: DatabasePool
    let path: String

    func write<T>(_ operation: String, _ body: (Database) throws -> T) throws(StateError) -> T {
        do {
            return try pool.write(body)
        } catch {
            throw StateError(error, path: path, operation: operation)
        }
    }

    func read<T>(_ operation: String, _ body: (Database) throws -> T) throws(StateError) -> T {
        do {
            return try pool.read(body)
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

extension Row {
    func date(_ column: String) -> Date? {
        (self[column] as Int64?).map(Date.init(storedMilliseconds:))
    }
}
