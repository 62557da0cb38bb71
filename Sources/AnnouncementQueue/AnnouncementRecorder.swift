import SpeakAPI

/// Keeps the durable record of every announcement (the audit log): it is given each one's
/// `queued`, `started` and `finished` event, and each `repeat` of it, in order and in batches.
///
/// `record` is awaited by the event stream's recorder stage, never by a queue: it returns once
/// every event of the batch is durable (one transaction: a group commit), and until it does, a
/// `queued` or `finished` among them, and every event published after it, is held back from the
/// subscribers. So no client learns of an acceptance or an outcome that a crash right after
/// could lose, and the queue goes on scheduling meanwhile. `started` and `repeat` are written in
/// the next batch without being held back. A recorder that cannot write (a full disk) says so its
/// own way and returns: the events are released all the same.
public protocol AnnouncementRecorder: Sendable {
    func record(_ events: [AnnouncementEvent]) async
}

/// The events a recorder is given.
let recordedEventKinds: Set<AnnouncementEvent.Kind> = [.queued, .started, .finished, .repeat]
/// The events that no subscriber sees before the recorder has written them.
let heldEventKinds: Set<AnnouncementEvent.Kind> = [.queued, .finished]
