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
    /// Given each announcement's `queued`, `started`, `finished` and `repeat`, in batches, before
    /// a `queued` or `finished` reaches any subscriber.
    let recorder: (any AnnouncementRecorder)?
    private let state = Mutex(State())
    /// Held while handing events to subscribers, so each gets them in sequence order, replay
    /// first; it also holds the events waiting for their record. It is separate from `state`
    /// because yielding can wake a consumer's task, which takes that task's lock, while a
    /// consumer being cancelled holds its task's lock and calls the termination handler, which
    /// takes `state`: one lock for both would deadlock.
    private let delivery = Mutex(Pipeline())

    /// The recorder stage: events on their way from the publishers to the subscribers.
    ///
    /// A publisher never waits here. A `queued` or `finished` waits in `held` until the batch
    /// holding its record has been written, and every event published after it waits behind
    /// it, so the subscribers get them in the order they were published. Records that arrive
    /// while a batch is being written go together in the next one (a group commit).
    private struct Pipeline {
        struct Held {
            var event: AnnouncementEvent
            var progress: Bool
            /// Its publish ticket; 0 for a progress event.
            var ticket: UInt64
            /// The write ticket that must be durable before it goes out; 0 when none.
            var needsWritten: UInt64
        }
        /// Events waiting for a record, oldest first.
        var held: [Held] = []
        /// Records not yet handed to the recorder, oldest first.
        var unwritten: [AnnouncementEvent] = []
        var nextWrite: UInt64 = 1
        /// Records up to this write ticket have been written (or reported as failed).
        var written: UInt64 = 0
        /// Whether a writer task is running.
        var isWriting = false
        var nextTicket: UInt64 = 1
        /// Every event up to this publish ticket has gone out to the subscribers.
        var released: UInt64 = 0
        var releaseWaiters: [(ticket: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        /// The last publisher finished while events were held: the streams end once they are out.
        var finishRequested = false

        /// Removes and returns the waiters whose ticket has been released.
        mutating func takeReleasedWaiters() -> [CheckedContinuation<Void, Never>] {
            guard releaseWaiters.contains(where: { $0.ticket <= released }) else { return [] }
            let ready = releaseWaiters.filter { $0.ticket <= released }.map(\.continuation)
            releaseWaiters.removeAll { $0.ticket <= released }
            return ready
        }
    }

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

    /// Sends `event` to every subscriber, after its record when it is a `queued` or `finished`;
    /// never waits. Returns its publish ticket, for ``untilReleased(_:)``.
    @discardableResult
    func publish(_ event: AnnouncementEvent) -> UInt64 {
        let records = recorder != nil && recordedEventKinds.contains(event.type)
        let holds = records && heldEventKinds.contains(event.type)
        let (ticket, startsWriter, waiters) = delivery.withLock { pipeline in
            let ticket = pipeline.nextTicket
            pipeline.nextTicket += 1
            var write: UInt64 = 0
            if records {
                pipeline.unwritten.append(event)
                write = pipeline.nextWrite
                pipeline.nextWrite += 1
            }
            if holds || !pipeline.held.isEmpty {
                pipeline.held.append(
                    Pipeline.Held(event: event, progress: false, ticket: ticket, needsWritten: holds ? write : 0))
            } else {
                deliverLocked(event, progress: false)
                pipeline.released = ticket
            }
            let startsWriter = records && !pipeline.isWriting
            if startsWriter { pipeline.isWriting = true }
            // A held event releases no waiter: only the writer releases it.
            return (ticket, startsWriter, pipeline.released == ticket ? pipeline.takeReleasedWaiters() : [])
        }
        for waiter in waiters { waiter.resume() }
        if startsWriter { writeRecords() }
        return ticket
    }

    /// The publish ticket of the newest event published, 0 before the first.
    var lastTicket: UInt64 {
        delivery.withLock { $0.nextTicket - 1 }
    }

    /// Returns once the event of publish `ticket`, and every one before it, has gone out to the
    /// subscribers: for a `queued` or `finished`, once its record is durable.
    func untilReleased(_ ticket: UInt64) async {
        await withCheckedContinuation { continuation in
            let now = delivery.withLock { pipeline -> Bool in
                guard pipeline.released < ticket else { return true }
                pipeline.releaseWaiters.append((ticket, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The recorder stage's writer: hands the records waiting to the recorder in one batch; once
    /// they are written, releases the events that waited for them and hands over the next batch,
    /// until no record waits. It never waits itself: the recorder writes on its own thread
    /// (GRDB's writer queue) and calls back from there.
    private func writeRecords() {
        guard let recorder else { return }
        let batch = delivery.withLock { pipeline -> (events: [AnnouncementEvent], through: UInt64)? in
            guard !pipeline.unwritten.isEmpty else {
                pipeline.isWriting = false
                return nil
            }
            defer { pipeline.unwritten = [] }
            return (pipeline.unwritten, pipeline.nextWrite - 1)
        }
        guard let batch else { return }
        recorder.record(batch.events) {
            self.released(through: batch.through)
            self.writeRecords()
        }
    }

    /// Sends out the held events whose records, up to write ticket `through`, are now written.
    private func released(through: UInt64) {
        let waiters = delivery.withLock { pipeline -> [CheckedContinuation<Void, Never>] in
            pipeline.written = through
            var out = 0
            for held in pipeline.held {
                guard held.needsWritten <= pipeline.written else { break }
                deliverLocked(held.event, progress: held.progress)
                if held.ticket > 0 { pipeline.released = held.ticket }
                out += 1
            }
            pipeline.held.removeFirst(out)
            if pipeline.finishRequested, pipeline.held.isEmpty {
                pipeline.finishRequested = false
                finishLocked()
            }
            return pipeline.takeReleasedWaiters()
        }
        for waiter in waiters { waiter.resume() }
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
        let event = make()
        delivery.withLock { pipeline in
            if pipeline.held.isEmpty {
                deliverLocked(event, progress: true)
            } else {
                pipeline.held.append(Pipeline.Held(event: event, progress: true, ticket: 0, needsWritten: 0))
            }
        }
    }

    /// Sends `event` to the subscribers that take it; keeps it in the history unless it is
    /// `progress`. Called with `delivery` held.
    private func deliverLocked(_ event: AnnouncementEvent, progress: Bool) {
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
        guard let (sequenced, subscribers) = taken else { return }
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

    /// Ends every stream after the events already published (those waiting for their record
    /// too), once every publisher has called it; later subscribers get history only.
    func finish() {
        delivery.withLock { pipeline in
            let last = state.withLock { state -> Bool in
                state.publishers -= 1
                return state.publishers <= 0
            }
            guard last else { return }
            if pipeline.held.isEmpty {
                finishLocked()
            } else {
                pipeline.finishRequested = true
            }
        }
    }

    /// Ends every stream. Called with `delivery` held.
    private func finishLocked() {
        let continuations = state.withLock { state -> [Continuation] in
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
