import SpeakAPI

/// Keeps the durable record of every announcement (the audit log): it is given each one's
/// `queued`, `started` and `finished` event, and each `repeat` of it, in order and in batches.
///
/// `record` is called by the event stream's recorder stage and must not block: it starts the
/// write of the batch (one transaction: a group commit) and calls `done` once every event of it
/// is durable. Until then a `queued` or `finished` among them, and every event published after
/// it, is held back from the subscribers. So no client learns of an acceptance or an outcome that
/// a crash right after could lose, and the queue goes on scheduling meanwhile. `started` and
/// `repeat` are written in the next batch without being held back. A recorder that cannot write
/// (a full disk) says so its own way and calls `done`: the events are released all the same.
///
/// `done` rather than `async`: the audit log calls it on its database's writer thread, and the
/// stage takes the next batch and releases the held events right there, with no task to resume
/// between one batch and the next (each such hop cost the posts a thread switch per batch).
public protocol AnnouncementRecorder: Sendable {
    /// Starts writing the records of `events`; calls `done` (on any thread, possibly before it
    /// returns) once they are durable or their failure has been reported.
    func record(_ events: [AnnouncementEvent], then done: @escaping @Sendable () -> Void)
}

extension AnnouncementRecorder {
    /// Writes the records of `events`; returns once they are durable or their failure has been
    /// reported.
    public func record(_ events: [AnnouncementEvent]) async {
        await withCheckedContinuation { continuation in
            record(events) { continuation.resume() }
        }
    }
}

/// The events a recorder is given.
let recordedEventKinds: Set<AnnouncementEvent.Kind> = [.queued, .started, .finished, .repeat]
/// The events that no subscriber sees before the recorder has written them.
let heldEventKinds: Set<AnnouncementEvent.Kind> = [.queued, .finished]
