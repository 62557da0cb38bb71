import Foundation
internal import GRDB
import Synchronization

/// Puts the audit log's unsynced commits (``Storage/commitUnsynced(_:_:)``) on the disk within
/// about a second of their writing, with SQLite's own passive checkpoint (which syncs the WAL
/// before it copies it into the database file) on a connection of its own. So the writer, which
/// the audit log's batches and every post's answer wait for, never waits for that flush; a
/// passive checkpoint runs beside the writer and never blocks it.
///
/// It is the database's only checkpointer: the writer's own automatic checkpoint is off
/// (``StateDatabase``), since past SQLite's 1,000 pages of WAL it ran on the writer after every
/// commit, two disk flushes each, for as long as a passive checkpoint beside it could not catch up
/// with a busy writer. A passive checkpoint never waits for the writer, so under a writer that
/// never pauses the WAL would only grow: past ``walFrameLimit`` frames a restarting checkpoint
/// takes the writer's lock between two commits (the writer waits out that one checkpoint) and the
/// next commit starts the WAL again from its beginning.
final class WALSyncer: Sendable {
    /// The WAL's frames (pages of about 4 KiB) past which a checkpoint restarts it: 64 MiB.
    static let walFrameLimit = 16_384

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
            _ = try await connection.writeWithoutTransaction { db in
                let frames = try db.checkpoint(.passive).walFrameCount
                if frames > Self.walFrameLimit {
                    // Without a busy handler: when the writer is in a commit now, this is a
                    // passive checkpoint again, and the next second tries once more.
                    _ = try? db.checkpoint(.restart)
                }
            }
        } catch {
            pending.store(true, ordering: .releasing)
        }
    }
}
