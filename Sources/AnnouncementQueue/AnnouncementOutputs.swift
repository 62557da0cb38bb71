import FoundationEssentials
import SpeakAPI
import Synchronization

/// What the queues of several outputs share: one event stream (one sequence, so `Last-Event-ID`
/// resumes across all of them) and one id space (so an id names one announcement whichever
/// queue holds it).
public final class SharedQueueState: Sendable {
    let broadcaster: EventBroadcaster
    let ids = AnnouncementIDs()
    let zoneBook = ZoneBook()

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

/// The announcements heard in several zones, by id: unfinished ones, and the most recent
/// finished ones so their `finished` can still be read.
final class ZoneBook: Sendable {
    private struct State {
        var byID: [String: ZoneAnnouncement] = [:]
        var order: [String] = []
    }
    private let state = Mutex(State())
    private let memory = 1024

    func add(_ zoned: ZoneAnnouncement) {
        state.withLock { state in
            state.byID[zoned.id] = zoned
            state.order.append(zoned.id)
            // Forgets the oldest finished ones beyond the memory; unfinished ones stay.
            while state.order.count > memory, let oldest = state.order.first,
                state.byID[oldest]?.finishedEvent != nil
            {
                state.order.removeFirst()
                state.byID[oldest] = nil
            }
        }
    }

    subscript(id: String) -> ZoneAnnouncement? { state.withLock { $0.byID[id] } }
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
    /// Waits for an event to be released to the subscribers (its record durable).
    private let untilReleased: @Sendable () async -> Void
    private let ids: AnnouncementIDs
    private let zoneBook: ZoneBook
    /// The zone groups (`--zone-group NAME=OUTPUT,OUTPUT`): a name that stands for its outputs
    /// wherever an output's name is accepted.
    public let zoneGroups: [String: [String]]
    /// How long the zones of one announcement that are ready wait for the others
    /// (`ZoneAnnouncement`); a zone not ready by then fails it there.
    public let zoneStartTimeout: Duration

    /// The default `zoneStartTimeout`.
    public static let defaultZoneStartTimeout = Duration.seconds(30)

    /// - Parameters:
    ///   - queues: one queue per output, made with `shared`; names must be unique and one must be `default`.
    ///   - shared: the state the queues were made with.
    ///   - zoneGroups: named groups of outputs; checked with `checkZoneGroups(_:outputs:)`.
    ///   - zoneStartTimeout: how long ready zones of one announcement wait for the others.
    public init(
        _ queues: [AnnouncementQueue], shared: SharedQueueState, zoneGroups: [String: [String]] = [:],
        zoneStartTimeout: Duration = defaultZoneStartTimeout
    ) {
        precondition(
            queues.contains { $0.output == Self.defaultName }, "the output called 'default' is missing")
        self.queues = queues
        self.zoneGroups = zoneGroups
        self.zoneStartTimeout = zoneStartTimeout
        self.ids = shared.ids
        self.zoneBook = shared.zoneBook
        self.untilReleased = { await shared.broadcaster.untilReleased(shared.broadcaster.lastTicket) }
        self.byName = Dictionary(uniqueKeysWithValues: queues.map { ($0.output, $0) })
        self.subscribe = { shared.broadcaster.subscribe(after: $0, progress: $1) }
        self.lastSequence = { shared.broadcaster.lastSequence }
        self.publishEvent = { _ = shared.broadcaster.publish($0) }
    }

    /// One queue as the only output, `default` whatever its own name.
    public init(single queue: AnnouncementQueue) {
        self.queues = [queue]
        self.zoneGroups = [:]
        self.zoneStartTimeout = Self.defaultZoneStartTimeout
        self.ids = queue.ids
        self.zoneBook = ZoneBook()
        self.untilReleased = { await queue.untilEventsReleased() }
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

    /// Checks zone groups against the outputs, as the daemon does at start.
    /// - Returns: a sentence naming what is wrong (a member that is no output, a group that has
    ///   an output's name, an empty group), or nil when all is well.
    public static func checkZoneGroups(_ groups: [String: [String]], outputs: [String]) -> String? {
        for (name, members) in groups.sorted(by: { $0.key < $1.key }) {
            if outputs.contains(name) {
                return "zone group '\(name)' has the name of an output; give it another"
            }
            if members.isEmpty { return "zone group '\(name)' names no output" }
            for member in members where !outputs.contains(member) {
                return "zone group '\(name)' names '\(member)', which is no output (\(outputs.joined(separator: ", ")))"
            }
            if Set(members).count != members.count { return "zone group '\(name)' names an output twice" }
        }
        return nil
    }

    /// The outputs a request addresses: `names` (an output or a zone group each), each output
    /// once, in order.
    /// - Throws: `AnnouncementQueueError.invalidValue` naming `output` (one name) or
    ///   `output[INDEX]` (a list) for a name that is neither an output nor a group.
    public func zones(named names: [String], list: Bool) throws(AnnouncementQueueError) -> [String] {
        var zones: [String] = []
        for (index, name) in names.enumerated() {
            let members: [String]
            if byName[name] != nil {
                members = [name]
            } else if let group = zoneGroups[name] {
                members = group
            } else {
                let known = (self.names + zoneGroups.keys.sorted()).joined(separator: ", ")
                throw .invalidValue(
                    field: list ? "output[\(index)]" : "output",
                    message: "no output or zone group is called '\(name)'; this speakd has \(known)")
            }
            for member in members where !zones.contains(member) { zones.append(member) }
        }
        return zones
    }

    /// Queues one announcement in several outputs (zones): one id, each zone's queue taking it
    /// by its own rules, all starting together (`ZoneAnnouncement`), one `finished`.
    ///
    /// A zone whose queue refuses it (full, shut down) or that `isDown` says is down fails it
    /// there from the start; when every zone refuses, nothing is accepted and the first zone's
    /// error is thrown.
    /// - Parameters:
    ///   - prepared: the announcement, as for one output (its `output` is ignored).
    ///   - zones: the outputs, each once, from `zones(named:list:)`.
    ///   - isDown: why a zone's audio is down, or nil when it is up.
    /// - Returns: what the request's poster is told: the first zone's answer, under the shared id.
    public func submit(
        _ prepared: PreparedAnnouncement, zones: [String], isDown: (String) async -> String? = { _ in nil }
    ) async throws(AnnouncementQueueError) -> AnnouncementAccepted {
        var id: String
        repeat {
            let number = String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
            id = String(repeating: "0", count: 12 - number.count) + number
        } while !ids.claim(id)
        var queued = AnnouncementEvent(
            type: .queued, id: id, text: prepared.delivery.isPrivate ? "" : prepared.speech.utterance.text,
            priority: prepared.delivery.priority, timestamp: Date(), output: zones.joined(separator: ","))
        queued.origin = prepared.origin
        queued.isPrivate = prepared.delivery.isPrivate
        let byName = self.byName
        let claimed = id
        let zoned = ZoneAnnouncement(
            id: id, zones: zones, template: queued, startTimeout: zoneStartTimeout, publish: publishEvent,
            withdraw: { zone, detail in
                guard let queue = byName[zone] else { return }
                Task { await queue.withdraw(id: claimed, detail: detail) }
            })
        zoneBook.add(zoned)
        var answers: [AnnouncementAccepted] = []
        var firstError: AnnouncementQueueError?
        for zone in zones {
            let queue = try queue(requiring: zone)
            if let down = await isDown(zone) {
                zoned.zoneRefused(zone, detail: "its audio is unavailable: \(down)")
                firstError = firstError ?? .invalidValue(field: "output", message: "output '\(zone)': \(down)")
                continue
            }
            do {
                var member = prepared
                member.output = zone
                answers.append(try await queue.submit(member, member: ZoneMember(group: zoned, zone: zone)))
            } catch {
                zoned.zoneRefused(zone, detail: String(describing: error))
                firstError = firstError ?? error
            }
        }
        if answers.isEmpty, let firstError {
            ids.release(id)
            throw firstError
        }
        publishEvent(queued)
        zoned.seal()
        await untilReleased()
        var accepted = answers[0]
        accepted.id = id
        return accepted
    }

    /// The announcement heard in several zones that has `id`, if it is one.
    func zoneAnnouncement(id: String) -> ZoneAnnouncement? { zoneBook[id] }

    /// The queue holding (or remembering) `id`.
    public func queue(holding id: String) async -> AnnouncementQueue? {
        for queue in queues where await queue.status(id: id) != nil { return queue }
        return nil
    }

    /// One announcement in whichever queue holds it; a private one's text is empty (its poster
    /// reads it through the intake, with its key). One heard in several zones is shown whole
    /// (`zoneStatus`).
    public func status(id: String) async -> AnnouncementStatus? {
        if let zoned = zoneBook[id] { return await zoneStatus(zoned) }
        for queue in queues {
            if let status = await queue.status(id: id) { return status }
        }
        return nil
    }

    /// An announcement heard in several zones, as one: finished only once its one `finished`
    /// is out (with that event's outcome); before that speaking while any zone speaks, paused
    /// when every zone still speaking it is paused, else waiting, at the nearest zone's
    /// position. `output` is the first zone the request named.
    private func zoneStatus(_ zoned: ZoneAnnouncement) async -> AnnouncementStatus? {
        var members: [AnnouncementStatus] = []
        for zone in zoned.zones {
            if let queue = byName[zone], let status = await queue.status(id: zoned.id) { members.append(status) }
        }
        guard var whole = members.first else { return nil }
        whole.output = zoned.zones.first
        if let finished = zoned.finishedEvent {
            whole.state = .finished
            whole.position = nil
            whole.success = finished.success
            whole.reason = finished.reason
            return whole
        }
        whole.success = nil
        whole.reason = nil
        let sounding = members.filter { $0.state == .speaking || $0.state == .paused }
        if !sounding.isEmpty {
            whole.state = sounding.allSatisfy { $0.state == .paused } ? .paused : .speaking
            whole.position = 0
        } else {
            whole.state = .queued
            whole.position = members.compactMap(\.position).min()
        }
        return whole
    }

    /// Pauses announcement `id` in every zone where it is speaking (one heard in several zones),
    /// or in the queue that holds it.
    /// - Throws: `AnnouncementQueueError`: unknown, or not speaking in any zone.
    public func pause(id: String, atWordEnd: Bool) async throws(AnnouncementQueueError) -> AnnouncementStatus {
        guard let zoned = zoneBook[id] else {
            guard let queue = await queue(holding: id) else { throw .unknownAnnouncement(id) }
            return try await queue.pause(id: id, atWordEnd: atWordEnd)
        }
        return try await inEveryZone(of: zoned) { queue throws(AnnouncementQueueError) in
            try await queue.pause(id: id, atWordEnd: atWordEnd)
        }
    }

    /// Runs `change` (a pause or a resume) in each zone's queue; the announcement's whole status
    /// after it, or the first zone's error when it was done in none.
    private func inEveryZone(
        of zoned: ZoneAnnouncement,
        _ change: (AnnouncementQueue) async throws(AnnouncementQueueError) -> AnnouncementStatus
    ) async throws(AnnouncementQueueError) -> AnnouncementStatus {
        var firstError: AnnouncementQueueError?
        var done = false
        for zone in zoned.zones {
            guard let queue = byName[zone] else { continue }
            do {
                _ = try await change(queue)
                done = true
            } catch {
                firstError = firstError ?? error
            }
        }
        if !done, let firstError { throw firstError }
        guard let status = await zoneStatus(zoned) else { throw .unknownAnnouncement(zoned.id) }
        return status
    }

    /// Resumes paused announcement `id` in every zone where it is paused, or in the queue that
    /// holds it.
    /// - Throws: `AnnouncementQueueError`: unknown, or not paused in any zone.
    public func resume(id: String) async throws(AnnouncementQueueError) -> AnnouncementStatus {
        guard let zoned = zoneBook[id] else {
            guard let queue = await queue(holding: id) else { throw .unknownAnnouncement(id) }
            return try await queue.resume(id: id)
        }
        return try await inEveryZone(of: zoned) { queue throws(AnnouncementQueueError) in
            try await queue.resume(id: id)
        }
    }

    /// Cancels `id` in whichever queue holds it.
    /// - Throws: `AnnouncementQueueError.unknownAnnouncement` when no queue knows it.
    public func cancel(id: String) async throws(AnnouncementQueueError) -> Bool {
        if let zoned = zoneBook[id] {
            var cancelled = false
            for zone in zoned.zones {
                if let queue = byName[zone], (try? await queue.cancel(id: id)) == true { cancelled = true }
            }
            return cancelled
        }
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
        if let zoned = zoneBook[id] {
            let event = await zoned.finished()
            await untilReleased()
            return event
        }
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
