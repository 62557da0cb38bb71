import SpeakAPI
import SpeechModel

/// The real queue behind the routes.
extension Queue: AnnouncementScheduling {
    public func accept(_ request: AnnouncementRequest) async throws(SchedulingError) -> AnnouncementAccepted {
        let submission: QueueSubmission
        do throws(QueueError) {
            submission = try submit(
                QueueRequest(
                    utterance: request.utterance, priority: request.priority, queue: request.queue,
                    expiresAfter: request.expiresAfter))
        } catch {
            if error == QueueError.queueFull { throw .queueFull(capacity: capacity) }
            if error == QueueError.shuttingDown { throw .shuttingDown }
            throw .invalidValue(field: error.field, error.message)
        }
        return AnnouncementAccepted(id: submission.id, state: Self.wireState(submission.state), position: submission.position)
    }

    public func cancelAnnouncement(id: String) async throws(SchedulingError) -> Bool {
        guard status(id: id) != nil else { throw .unknownAnnouncement(id) }
        return cancel(id: id)
    }

    public func cancelEveryAnnouncement() async -> Int {
        cancelAll()
    }

    public func announcementList() async -> [SpeakAPI.AnnouncementStatus] {
        snapshot().map(Self.wireStatus)
    }

    public func announcementStatus(id: String) async -> SpeakAPI.AnnouncementStatus? {
        status(id: id).map(Self.wireStatus)
    }

    public nonisolated func eventStream(after sequence: UInt64?) async -> AsyncStream<SequencedAnnouncementEvent> {
        let events = events(after: sequence)
        return AsyncStream { continuation in
            let relay = Task {
                for await event in events {
                    continuation.yield(SequencedAnnouncementEvent(sequence: event.sequence, event: event.event))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in relay.cancel() }
        }
    }

    public func waitForFinish(id: String) async throws(SchedulingError) -> AnnouncementEvent {
        guard let event = await finished(id: id) else { throw .unknownAnnouncement(id) }
        return event
    }

    private static func wireState(_ state: QueueState) -> SpeakAPI.AnnouncementState {
        switch state {
        case .waiting: .queued
        case .speaking: .speaking
        case .finished: .finished
        }
    }

    private static func wireStatus(_ status: QueueStatus) -> SpeakAPI.AnnouncementStatus {
        SpeakAPI.AnnouncementStatus(
            id: status.id, text: status.text, priority: status.priority, state: wireState(status.state),
            position: status.position, success: status.finished?.success, reason: status.finished?.reason)
    }
}
