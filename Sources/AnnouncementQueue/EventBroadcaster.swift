import SpeechModel
import Synchronization

/// An event with its position in the queue's event stream (the SSE `id:`).
public struct SequencedEvent: Sendable, Hashable {
    /// Increases by one with every event the queue sends, starting at 1.
    public var sequence: UInt64
    public var event: AnnouncementEvent

    public init(sequence: UInt64, event: AnnouncementEvent) {
        self.sequence = sequence
        self.event = event
    }
}

/// Fans events out to any number of subscribers and keeps a bounded history for resuming.
///
/// Publishing never waits for a subscriber: each one has a bounded buffer, and a subscriber
/// that falls so far behind that its buffer overflows has its stream ended, so it reconnects
/// with the last sequence it saw and is replayed from history instead of silently missing events.
final class EventBroadcaster: Sendable {
    private struct State {
        var nextSequence: UInt64 = 1
        /// Oldest first; trimmed to `historyCapacity` in batches so trimming stays cheap.
        var history: [SequencedEvent] = []
        var subscribers: [UInt64: AsyncStream<SequencedEvent>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var isFinished = false
    }

    let historyCapacity: Int
    let subscriberBuffer: Int
    private let state = Mutex(State())

    /// - Parameters:
    ///   - historyCapacity: how many recent events a new subscriber can be replayed.
    ///   - subscriberBuffer: how many live events a subscriber may have unread before it is dropped.
    init(historyCapacity: Int, subscriberBuffer: Int) {
        precondition(historyCapacity >= 0 && subscriberBuffer >= 1)
        self.historyCapacity = historyCapacity
        self.subscriberBuffer = subscriberBuffer
    }

    /// Sends `event` to every subscriber and records it; returns its sequence number.
    @discardableResult
    func publish(_ event: AnnouncementEvent) -> UInt64 {
        var overflowed: [AsyncStream<SequencedEvent>.Continuation] = []
        let sequence = state.withLock { state -> UInt64 in
            let sequenced = SequencedEvent(sequence: state.nextSequence, event: event)
            state.nextSequence += 1
            state.history.append(sequenced)
            if state.history.count >= 2 * historyCapacity + 1 {
                state.history.removeFirst(state.history.count - historyCapacity)
            }
            for (key, continuation) in state.subscribers {
                switch continuation.yield(sequenced) {
                case .enqueued: break
                case .dropped:
                    state.subscribers[key] = nil
                    overflowed.append(continuation)
                case .terminated:
                    state.subscribers[key] = nil
                @unknown default: break
                }
            }
            return sequenced.sequence
        }
        // Finishing runs the stream's termination handler, which takes the lock again.
        for continuation in overflowed { continuation.finish() }
        return sequence
    }

    /// Events after `sequence` still in history, then live ones until `finish()`.
    ///
    /// - Parameter sequence: the last sequence the subscriber saw; nil for live events only,
    ///   0 for the whole history.
    func subscribe(after sequence: UInt64?) -> AsyncStream<SequencedEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SequencedEvent.self, bufferingPolicy: .bufferingOldest(historyCapacity + subscriberBuffer))
        let key = state.withLock { state -> UInt64? in
            if let sequence {
                for event in state.history where event.sequence > sequence {
                    continuation.yield(event)
                }
            }
            guard !state.isFinished else { return nil }
            let key = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[key] = continuation
            return key
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    /// The sequence number of the newest event sent, 0 before the first.
    var lastSequence: UInt64 {
        state.withLock { $0.nextSequence - 1 }
    }

    /// Ends every stream after the events already sent; later subscribers get history only.
    func finish() {
        let continuations = state.withLock { state in
            state.isFinished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
