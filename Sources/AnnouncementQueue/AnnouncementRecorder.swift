import SpeakAPI

/// Keeps the durable record of every announcement (the audit log): it is told of each one's
/// `queued`, `started` and `finished` event, and each `repeat` of it, before any subscriber sees it.
///
/// `record` runs on the publisher's task. For `queued` and `finished` it returns only once the
/// record is durable, so no announcement is accepted, and no client learns an outcome, that a
/// crash right after could lose; for the others it may return before the write is done, as long
/// as the records stay in order.
public protocol AnnouncementRecorder: Sendable {
    func record(_ event: AnnouncementEvent)
}

/// The events a recorder is told of.
let recordedEventKinds: Set<AnnouncementEvent.Kind> = [.queued, .started, .finished, .repeat]
