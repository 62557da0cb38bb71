import SpeakAPI
import SpeechModel

/// What the HTTP front needs from the announcement queue.
///
/// `AnnouncementQueue` conforms; keeping the routes behind this protocol keeps the server free of
/// scheduling logic and lets route tests drive the real queue or a scripted one.
public protocol AnnouncementScheduling: Sendable {
    /// Accepts an announcement, with its utterance as the renderer prepared it, and gives it an
    /// id, or throws `SchedulingError` (`queueFull`, `shuttingDown`, `invalidValue`).
    func accept(
        _ request: AnnouncementRequest, speech: PreparedUtterance
    ) async throws(SchedulingError) -> AnnouncementAccepted

    /// Cancels one announcement; returns false when it had already finished or is stopping.
    /// Throws `SchedulingError.unknownAnnouncement` for an id the queue never had (or forgot).
    func cancelAnnouncement(id: String) async throws(SchedulingError) -> Bool

    /// Cancels every waiting and the speaking announcement; returns how many this cancelled.
    func cancelEveryAnnouncement() async -> Int

    /// The speaking announcement first, then the waiting ones in the order they will be spoken.
    func announcementList() async -> [AnnouncementStatus]

    /// One announcement's state, including recently finished ones; nil when unknown.
    func announcementStatus(id: String) async -> AnnouncementStatus?

    /// Events with a sequence number greater than `sequence` still in the bounded history
    /// (nil: live events only), then live events as they happen. The sequence ends when the
    /// queue has shut down and every event has been delivered.
    func eventStream(after sequence: UInt64?) async -> AsyncStream<SequencedAnnouncementEvent>

    /// Waits for the `finished` event of `id` (at once if it has finished already).
    func waitForFinish(id: String) async throws(SchedulingError) -> AnnouncementEvent

    /// The most announcements that may wait at once.
    var capacity: Int { get }
}
