import Foundation
internal import GRDB
import Synchronization

/// Puts the audit log's unsynced commits (``Storage/commitUnsynced(_:_:)``) on the disk within
/// about a second of their writing, with SQLite's own passive checkpoint (which syncs the WAL
/// before it copies it into the database file) on a connection of its own. So the writer, which
/// the audit log's batches and every post's answer wait for, never waits for that flush; a
/// passive checkpoint runs beside the writer and never blocks it.
final class WALSyncer: Sendable {
    private let connection: DatabaseQueue
    private let pending = Atomic<Bool>(false)
    private let loop = Mutex<Task<Void, Never>?>(nil)

    /// - Parameters:
    ///   - path: the database file.
    ///   - interval: how long a commit may wait for its sync.
    init(path: String, interval: Duration = .seconds(1)) throws {
        var configuration = Configuration()
        configuration.label = "speakd.state.sync"
        connection = try DatabaseQueue(path: path, configuration: configuration)
        let task = Task.detached { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self else { return }
                await self.syncIfWritten()
            }
        }
        loop.withLock { $0 = task }
    }

    deinit { stop() }

    /// Says that a commit waits for its sync.
    func wrote() { pending.store(true, ordering: .releasing) }

    /// Ends the loop, syncs what was written since the last sync, and closes the connection
    /// (so the writer's own close can remove the WAL).
    func stop() {
        let task = loop.withLock { task in
            defer { task = nil }
            return task
        }
        guard let task else { return }
        task.cancel()
        if pending.exchange(false, ordering: .acquiringAndReleasing) {
            _ = try? connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        }
        try? connection.close()
    }

    /// Checkpoints when something was written since the last time; a failure leaves it pending.
    private func syncIfWritten() async {
        guard pending.exchange(false, ordering: .acquiringAndReleasing) else { return }
        do {
            _ = try await connection.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        } catch {
            pending.store(true, ordering: .releasing)
        }
    }
}
