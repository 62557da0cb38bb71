import AnnouncementQueue
import SpeakAPI
import SpeakService

extension AnnouncementIntake {
    /// The sequence number of the newest event of any output: following after it misses nothing
    /// from here on.
    public var lastEventSequence: UInt64 { outputs.lastEventSequence }

    /// Every output's events after sequence number `start`, until the queues shut down. A reader
    /// that falls too far behind is dropped by the queues (they never wait for a slow reader); it
    /// is subscribed again here, from what their history still holds, after `.fellBehind`. The
    /// stream is pulled: each event is taken from the queues when the reader asks for the next.
    /// - Parameters:
    ///   - start: the last sequence number the reader has seen.
    ///   - progress: whether word, sentence, mark and clip events are wanted.
    public func followEvents(after start: UInt64, progress: Bool = false) -> AsyncStream<EventFeed> {
        let follower = EventFollower(outputs: outputs, after: start, progress: progress)
        return AsyncStream(unfolding: { await follower.next() })
    }

    /// Every output's events after sequence number `start` (the whole history when nil), as
    /// the queues send them: the stream ends when the reader falls too far behind, for a reader
    /// that resumes by itself from the last sequence number it saw (an event stream's client
    /// with `Last-Event-ID`). `followEvents` subscribes again instead.
    public func events(after start: UInt64? = nil, progress: Bool = false) -> AsyncStream<SequencedAnnouncementEvent> {
        outputs.events(after: start, progress: progress)
    }

    /// Every announcement waiting, speaking or paused, of every output.
    public func snapshot() async -> [AnnouncementStatus] {
        await outputs.snapshot()
    }

    /// How many announcements the default output's queue holds at most.
    public var capacity: Int { outputs.defaultQueue.capacity }

    /// How full the queue of output `name` (the default output's when nil) is; nil for an output
    /// there is none of.
    public func occupancy(of name: String? = nil) async -> HealthReport.Queue? {
        let queue: AnnouncementQueue
        if let name {
            guard let named = outputs.queue(named: name) else { return nil }
            queue = named
        } else {
            queue = outputs.defaultQueue
        }
        let snapshot = await queue.snapshot()
        let speaking = snapshot.contains { $0.state == .speaking || $0.state == .paused }
        return HealthReport.Queue(
            waiting: snapshot.count - (speaking ? 1 : 0), speaking: speaking, capacity: queue.capacity)
    }
}

/// `followEvents`'s reader of the queues' event stream, subscribing again after it fell behind.
// @unchecked Sendable: only the stream's consumer calls `next()`, one call at a time
// (AsyncStream(unfolding:) awaits each before the next).
private final class EventFollower: @unchecked Sendable {
    private let outputs: AnnouncementOutputs
    private let progress: Bool
    private var last: UInt64
    private var events: AsyncStream<SequencedAnnouncementEvent>.AsyncIterator

    init(outputs: AnnouncementOutputs, after start: UInt64, progress: Bool) {
        self.outputs = outputs
        self.progress = progress
        last = start
        events = outputs.events(after: start, progress: progress).makeAsyncIterator()
    }

    func next() async -> EventFeed? {
        if let sequenced = await events.next() {
            last = sequenced.sequence
            return .event(sequenced.event)
        }
        // The stream ends at shutdown, or when this reader fell too far behind.
        guard await outputs.defaultQueue.isRunning, !Task.isCancelled else { return nil }
        events = outputs.events(after: last, progress: progress).makeAsyncIterator()
        return .fellBehind
    }
}
