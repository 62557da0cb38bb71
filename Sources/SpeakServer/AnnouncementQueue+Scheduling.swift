import SpeakAPI
import SpeechModel

/// The real queue behind the routes.
extension Queue: AnnouncementScheduling {
    /// Submits to the queue; its refusals become `SchedulingError`s.
    public func accept(
        _ request: AnnouncementRequest, speech: PreparedUtterance
    ) async throws(SchedulingError) -> AnnouncementAccepted {
        do throws(QueueError) {
            return try submit(request, speech: speech)
        } catch {
            if error == QueueError.queueFull { throw .queueFull(capacity: capacity) }
            if error == QueueError.shuttingDown { throw .shuttingDown }
            throw .invalidValue(field: error.field, error.message)
        }
    }

    /// Cancels `id`; an id the queue does not know is `unknownAnnouncement`.
    public func cancelAnnouncement(id: String) async throws(SchedulingError) -> Bool {
        guard status(id: id) != nil else { throw .unknownAnnouncement(id) }
        return cancel(id: id)
    }

    /// Cancels the speaking and every waiting announcement.
    public func cancelEveryAnnouncement() async -> Int {
        cancelAll()
    }

    /// The queue's snapshot in wire form.
    public func announcementList() async -> [SpeakAPI.AnnouncementStatus] {
        snapshot().map(Self.wireStatus)
    }

    /// One announcement in wire form.
    public func announcementStatus(id: String) async -> SpeakAPI.AnnouncementStatus? {
        status(id: id).map(Self.wireStatus)
    }

    /// The queue's events with their sequence numbers.
    public nonisolated func eventStream(after sequence: UInt64?) async -> AsyncStream<SequencedAnnouncementEvent> {
        // The queue's own stream, so its per-subscriber bound applies: a reader that falls too
        // far behind has its stream ended and resumes with Last-Event-ID, instead of growing memory.
        events(after: sequence)
    }

    /// The `finished` event of `id`, waiting for it if need be.
    public func waitForFinish(id: String) async throws(SchedulingError) -> AnnouncementEvent {
        guard let event = await finished(id: id) else { throw .unknownAnnouncement(id) }
        return event
    }

    private static func wireStatus(_ status: QueueStatus) -> SpeakAPI.AnnouncementStatus {
        SpeakAPI.AnnouncementStatus(
            id: status.id, text: status.text, priority: status.priority, state: status.state,
            position: status.position, success: status.finished?.success, reason: status.finished?.reason)
    }
}
