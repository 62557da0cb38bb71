internal import GRDB

extension StateDatabase {
    /// Copies the WAL into the database file and empties the WAL, e.g. before a backup of the file alone.
    public func checkpoint() throws(StateError) {
        do {
            try storage.writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        } catch {
            throw StateError(error, path: path, operation: "checkpoint")
        }
    }

    /// Closes the file; every later call throws. Without it, the file closes when the database is released.
    public func close() throws(StateError) {
        storage.syncer?.stop()
        do {
            try storage.writer.close()
        } catch {
            throw StateError(error, path: path, operation: "close")
        }
    }
}
