import FoundationEssentials
import SpeakAPI
import Synchronization

/// What the queues of several outputs share: one event stream (one sequence, so `Last-Event-ID`
/// resumes across all of them) and one id space (so an id names one announcement whichever
/// queue holds it).
public final class SharedQueueState: Sendable {
    let broadcaster: EventBroadcaster
    let ids = AnnouncementIDs()

    /// - Parameters:
    ///   - eventHistory: how many recent events a resuming subscriber can be replayed.
    ///   - subscriberBuffer: how many live events a subscriber may leave unread before its stream ends.
    ///   - queues: how many queues publish here; the streams end when the last has shut down.
    ///   - recorder: keeps the record of every announcement (the audit log), or nil.
    public init(
        eventHistory: Int = 1024, subscriberBuffer: Int = 256, queues: Int,
        recorder: (any AnnouncementRecorder)? = nil
    ) {
        broadcaster = EventBroadcaster(
            historyCapacity: eventHistory, subscriberBuffer: subscriberBuffer, publishers: queues,
            recorder: recorder)
    }
}

/// The ids in use: waiting, speaking, or remembered as finished by some queue.
final class AnnouncementIDs: Sendable {
    private let inUse = Mutex(Set<String>())

    /// Takes `id`; false when some queue has it already.
    func claim(_ id: String) -> Bool {
        inUse.withLock { $0.insert(id).inserted }
    }

    /// Gives `id` back once no queue remembers it.
    func release(_ id: String) {
        _ = inUse.withLock { $0.remove(id) }
    }
}

/// The named outputs, each with its own `AnnouncementQueue`: an announcement goes to the queue
/// its request names (`output`, else `default`), waits and is interrupted only there, and the
/// others speak meanwhile. Ids are unique across the queues and the events of all of them come
/// in one stream, each carrying its output.
public struct AnnouncementOutputs: Sendable {
    /// The output of a request that names none, and the one `--audio` configures.
    public static let defaultName = "default"

    /// The queues in the order they were configured, `default` first.
    public let queues: [AnnouncementQueue]
    private let byName: [String: AnnouncementQueue]
    /// Subscribes to the events of every queue.
    private let subscribe: @Sendable (UInt64?, Bool) -> AsyncStream<SequencedAnnouncementEvent>
    /// The sequence number of the newest event of any queue.
    private let lastSequence: @Sendable () -> UInt64
    /// Sends an event that no queue makes (a session's, a headset's) in the same stream.
    private let publishEvent: @Sendable (AnnouncementEvent) -> Void

    /// - Parameters:
    ///   - queues: one queue per output, made with `shared`; names must be unique and one must be `default`.
    ///   - shared: the state the queues were made with.
    public init(_ queues: [AnnouncementQueue], shared: SharedQueueState) {
        precondition(
            queues.contains { $0.output == Self.defaultName }, "the output called 'default' is missing")
        self.queues = queues
        self.byName = Dictionary(uniqueKeysWithValues: queues.map { ($0.output, $0) })
        self.subscribe = { shared.broadcaster.subscribe(after: $0, progress: $1) }
        self.lastSequence = { shared.broadcaster.lastSequence }
        self.publishEvent = { _ = shared.broadcaster.publish($0) }
    }

    /// One queue as the only output, `default` whatever its own name.
    public init(single queue: AnnouncementQueue) {
        self.queues = [queue]
        self.byName = [queue.output: queue].merging([Self.defaultName: queue]) { $1 }
        self.subscribe = { queue.events(after: $0, progress: $1) }
        self.lastSequence = { queue.lastEventSequence }
        self.publishEvent = { queue.broadcast($0) }
    }

    /// Sends a `headset` event: headphones plugged into (`present` true) or pulled out of
    /// `output`; nil when its sink no longer says. It is in the one stream, after the events
    /// before it, so `Last-Event-ID` resumes across it.
    public func publishHeadset(output: String, present: Bool?) {
        var event = AnnouncementEvent(
            type: .headset, id: "", text: "", priority: .default, timestamp: Date(), output: output)
        event.present = present
        publishEvent(event)
    }

    /// The names of the outputs, `default` first.
    public var names: [String] { queues.map(\.output) }

    /// The queue of the output called `default`.
    public var defaultQueue: AnnouncementQueue { byName[Self.defaultName]! }

    /// The queue of `name`; nil for an output that is not configured.
    public func queue(named name: String) -> AnnouncementQueue? { byName[name] }

    /// The queue `prepared` is for.
    /// - Throws: `AnnouncementQueueError.invalidValue` naming `output` for an unknown one.
    public func queue(for prepared: PreparedAnnouncement) throws(AnnouncementQueueError) -> AnnouncementQueue {
        try queue(requiring: prepared.output ?? Self.defaultName)
    }

    /// The queue of the output called `name`, as a request or a query names it.
    /// - Throws: `AnnouncementQueueError.invalidValue` naming `output` when there is none.
    public func queue(requiring name: String) throws(AnnouncementQueueError) -> AnnouncementQueue {
        guard let queue = byName[name] else {
            throw .invalidValue(
                field: "output",
                message: "no output is called '\(name)'; this speakd has \(names.joined(separator: ", "))")
        }
        return queue
    }

    /// The queue holding (or remembering) `id`.
    public func queue(holding id: String) async -> AnnouncementQueue? {
        for queue in queues where await queue.status(id: id) != nil { return queue }
        return nil
    }

    /// One announcement in whichever queue holds it; a private one's text is empty (its poster
    /// reads it through the intake, with its key).
    public func status(id: String) async -> AnnouncementStatus? {
        for queue in queues {
            if let status = await queue.status(id: id) { return status }
        }
        return nil
    }

    /// Cancels `id` in whichever queue holds it.
    /// - Throws: `AnnouncementQueueError.unknownAnnouncement` when no queue knows it.
    public func cancel(id: String) async throws(AnnouncementQueueError) -> Bool {
        guard let queue = await queue(holding: id) else { throw .unknownAnnouncement(id) }
        return try await queue.cancel(id: id)
    }

    /// Cancels everything in every queue, or in the queue of `output` only.
    /// - Throws: `AnnouncementQueueError.invalidValue` naming `output` for an unknown one.
    public func cancelAll(output: String? = nil) async throws(AnnouncementQueueError) -> Int {
        if let output { return try await queue(requiring: output).cancelAll() }
        var count = 0
        for queue in queues { count += await queue.cancelAll() }
        return count
    }

    /// Every queue's speaking and waiting announcements, output by output in configured order.
    public func snapshot() async -> [AnnouncementStatus] {
        var result: [AnnouncementStatus] = []
        for queue in queues { result += await queue.snapshot() }
        return result
    }

    /// Waits for the `finished` event of `id` in whichever queue holds it.
    public func finished(id: String) async -> AnnouncementEvent? {
        guard let queue = await queue(holding: id) else { return nil }
        return await queue.finished(id: id)
    }

    /// The events of every queue, in one sequence; see `AnnouncementQueue.events(after:progress:)`.
    public func events(after: UInt64? = nil, progress: Bool = false) -> AsyncStream<SequencedAnnouncementEvent> {
        subscribe(after, progress)
    }

    /// The sequence number of the newest event of any queue, 0 before the first.
    public var lastEventSequence: UInt64 { lastSequence() }

    /// Sends `event`, which no queue made (a `session` or `repeat` event), to every subscriber
    /// of `events(after:progress:)`, in sequence with the queues' own and kept in the history.
    public func publish(_ event: AnnouncementEvent) {
        publishEvent(event)
    }

    /// Shuts every queue down at once.
    public func shutdown() async {
        await withDiscardingTaskGroup { group in
            for queue in queues { group.addTask { await queue.shutdown() } }
        }
    }
}
