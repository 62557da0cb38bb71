import SpeakAPI
import SpeechModel
import Synchronization

/// Fans events out to any number of subscribers and keeps a bounded history for resuming.
///
/// Publishing never waits for a subscriber: each one has a bounded buffer, and a subscriber
/// that falls so far behind that its buffer overflows has its stream ended, so it reconnects
/// with the last sequence it saw and is replayed from history instead of silently missing events.
final class EventBroadcaster: Sendable {
    private typealias Continuation = AsyncStream<SequencedAnnouncementEvent>.Continuation

    private struct Subscriber {
        var continuation: Continuation
        /// Whether it takes progress events.
        var progress: Bool
    }

    private struct State {
        var nextSequence: UInt64 = 1
        /// Oldest first; trimmed to `historyCapacity` in batches so trimming stays cheap.
        var history: [SequencedAnnouncementEvent] = []
        var subscribers: [UInt64: Subscriber] = [:]
        /// How many subscribers take progress events.
        var progressSubscribers = 0

        mutating func remove(_ key: UInt64) {
            guard let subscriber = subscribers.removeValue(forKey: key) else { return }
            if subscriber.progress { progressSubscribers -= 1 }
        }
        var nextSubscriber: UInt64 = 0
        var isFinished = false
        /// Queues still publishing; the streams end when the last one has finished.
        var publishers = 1
    }

    let historyCapacity: Int
    let subscriberBuffer: Int
    /// Told of each announcement's `queued`, `started` and `finished` before any subscriber.
    let recorder: (any AnnouncementRecorder)?
    private let state = Mutex(State())
    /// Held while handing events to subscribers, so each gets them in sequence order, replay
    /// first. It is separate from `state` because yielding can wake a consumer's task, which
    /// takes that task's lock, while a consumer being cancelled holds its task's lock and calls
    /// the termination handler, which takes `state`: one lock for both would deadlock.
    private let delivery = Mutex(())

    /// - Parameters:
    ///   - historyCapacity: how many recent events a new subscriber can be replayed.
    ///   - subscriberBuffer: how many live events a subscriber may have unread before it is dropped.
    ///   - publishers: how many queues publish here; `finish()` ends the streams on the last call.
    ///   - recorder: keeps the record of each announcement (the audit log), or nil.
    init(
        historyCapacity: Int, subscriberBuffer: Int, publishers: Int = 1,
        recorder: (any AnnouncementRecorder)? = nil
    ) {
        self.recorder = recorder
        self.historyCapacity = max(0, historyCapacity)
        self.subscriberBuffer = max(1, subscriberBuffer)
        state.withLock { $0.publishers = max(1, publishers) }
    }

    /// Sends `event` to every subscriber and records it; returns its sequence number.
    @discardableResult
    func publish(_ event: AnnouncementEvent) -> UInt64 {
        // Before delivery and outside the locks: a `finished` is seen by no one before its record
        // is durable, and a slow disk holds up this publisher only.
        if let recorder, recordedEventKinds.contains(event.type) { recorder.record(event) }
        return deliver(event, progress: false)!
    }

    /// Whether any subscriber takes progress events.
    var hasProgressSubscribers: Bool {
        state.withLock { $0.progressSubscribers > 0 }
    }

    /// Sends the event `make` builds to the subscribers that take progress events, without
    /// recording it: it is news only while it is heard, and it would crowd the announcements'
    /// states out of the history. Nothing is built when none takes them.
    func publishProgress(_ make: () -> AnnouncementEvent) {
        guard hasProgressSubscribers else { return }
        deliver(make(), progress: true)
    }

    /// Sends `event` to the subscribers that take it; records it unless it is `progress`.
    /// Nil when it is progress and none takes it.
    private func deliver(_ event: AnnouncementEvent, progress: Bool) -> UInt64? {
        delivery.withLock { _ in
            let taken = state.withLock { state -> (SequencedAnnouncementEvent, [UInt64: Subscriber])? in
                if progress, state.progressSubscribers == 0 { return nil }
                let sequenced = SequencedAnnouncementEvent(sequence: state.nextSequence, event: event)
                state.nextSequence += 1
                if !progress {
                    state.history.append(sequenced)
                    if state.history.count >= 2 * historyCapacity + 1 {
                        state.history.removeFirst(state.history.count - historyCapacity)
                    }
                }
                return (sequenced, state.subscribers)
            }
            guard let (sequenced, subscribers) = taken else { return nil }
            var gone: [UInt64] = []
            for (key, subscriber) in subscribers where subscriber.progress || !progress {
                let continuation = subscriber.continuation
                switch continuation.yield(sequenced) {
                case .enqueued: break
                case .dropped:
                    gone.append(key)
                    continuation.finish()
                case .terminated:
                    gone.append(key)
                @unknown default: break
                }
            }
            if !gone.isEmpty {
                state.withLock { state in
                    for key in gone { state.remove(key) }
                }
            }
            return sequenced.sequence
        }
    }

    /// Events after `sequence` still in history, then live ones until `finish()`.
    ///
    /// - Parameters:
    ///   - sequence: the last sequence the subscriber saw; nil for live events only, 0 for the
    ///     whole history.
    ///   - progress: whether it takes progress events.
    func subscribe(after sequence: UInt64?, progress: Bool = false) -> AsyncStream<SequencedAnnouncementEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SequencedAnnouncementEvent.self, bufferingPolicy: .bufferingOldest(historyCapacity + subscriberBuffer))
        delivery.withLock { _ in
            let (replay, key) = state.withLock { state -> ([SequencedAnnouncementEvent], UInt64?) in
                // History may hold up to twice its capacity between trims; replay only what the
                // buffer is sized for, so a replay never overflows it.
                let replay =
                    sequence.map { sequence in
                        Array(state.history.suffix(historyCapacity).filter { $0.sequence > sequence })
                    } ?? []
                guard !state.isFinished else { return (replay, nil) }
                let key = state.nextSubscriber
                state.nextSubscriber += 1
                state.subscribers[key] = Subscriber(continuation: continuation, progress: progress)
                if progress { state.progressSubscribers += 1 }
                return (replay, key)
            }
            for event in replay {
                continuation.yield(event)
            }
            guard let key else {
                continuation.finish()
                return
            }
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { $0.remove(key) }
            }
        }
        return stream
    }

    /// The sequence number of the newest event sent, 0 before the first.
    var lastSequence: UInt64 {
        state.withLock { $0.nextSequence - 1 }
    }

    /// Ends every stream after the events already sent, once every publisher has called it;
    /// later subscribers get history only.
    func finish() {
        delivery.withLock { _ in
            let continuations = state.withLock { state -> [Continuation] in
                state.publishers -= 1
                guard state.publishers <= 0 else { return [] }
                state.isFinished = true
                defer {
                    state.subscribers = [:]
                    state.progressSubscribers = 0
                }
                return state.subscribers.values.map(\.continuation)
            }
            for continuation in continuations { continuation.finish() }
        }
    }
}
