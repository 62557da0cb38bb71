import FoundationEssentials
import Logging
import PosixSupport
import SpeakAPI
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Speaks announcements one at a time, by priority, and sends exactly one `finished` event for
/// every announcement it accepts.
///
/// | new \ speaking | nothing | low | default | high |
/// |---|---|---|---|---|
/// | `low` | speak | wait | wait | wait |
/// | `default`, `queue: true` | speak | wait | wait | wait |
/// | `default`, `queue: false` | speak | interrupt | interrupt | wait, first after the high |
/// | `high` | speak | interrupt | interrupt | wait |
///
/// Waiting announcements are spoken high before default before low, first come first served
/// within a priority, except that a `queue: false` default goes to the front of the defaults
/// (the newest interrupting announcement is the one the client wants heard now).
///
/// A schedule's slots and SSIP clients' messages each have a share of their own (`QueueShare`,
/// `shareCapacity` places each) beside the live announcements' `capacity`, and at equal
/// priority they come after live ones: they wait behind every live announcement of their
/// priority, a `queue: false` default among them goes to the front of their defaults only, and
/// they never interrupt a live announcement of their priority. So none of them can make a live
/// announcement be refused, or wait behind more than the one speaking and those the table puts
/// first anyway (higher priority, or live ones that came before).
///
/// Nothing is spoken until `run()` is called; `shutdown()` (or cancelling the task running
/// `run()`) finishes everything with `shutdown` and ends the event streams.
///
/// Every accepted announcement gets `queued`, then `started` when its first audible sample is
/// heard, then exactly one `finished`. Each event's `timestamp` is the time of what it reports:
/// `started` the first audible sample, a word, sentence or mark its sample, as the speaker
/// estimates them heard; `finished` the end of the last sound when it played to the end, or
/// when it ended otherwise; the rest when they happened. Decisions where the contract leaves room:
/// - The reason of a speaking announcement is fixed by the first cancel, interrupt or shutdown;
///   its `finished` event is sent once the speaker has actually stopped (the sink is silent),
///   with `success: false` even if the speaker happened to play the last sample meanwhile.
/// - An interrupter waits, at the head of the list, until the interrupted one has stopped, so
///   the speaker is never asked to speak two announcements at once.
/// - A full share displaces its own newest waiting announcement of the lowest priority that is
///   below the new one's, so a `high` displaces a waiting `low` before any `default`; it never
///   takes another share's places.
/// - After `speak` throws, nothing starts until `waitUntilAvailable()` returns; meanwhile new
///   announcements are accepted and wait, and expiry timers keep running.
/// - A speaker that has not stopped `stopTimeout` after being cancelled is given up on: the
///   announcement finishes with its reason and the speaker is treated as failed.
/// - A paused announcement is still the speaking one: it is interrupted, cancelled and shut
///   down like one, and waiting ones keep their expiry timers running. Paused longer than
///   `pauseTimeout`, it finishes `interrupted` with a detail saying so.
public actor AnnouncementQueue {
    /// The default number of waiting announcements.
    public static let defaultCapacity = 64

    /// The places of each share beside the live ones' `capacity`: a quarter of it, at least one
    /// (none when the queue has none).
    public static func defaultShareCapacity(for capacity: Int) -> Int {
        capacity > 0 ? max(1, capacity / 4) : 0
    }

    /// The default time a cancelled speaker gets to stop.
    public static let defaultStopTimeout = Duration.seconds(2)

    /// The default longest pause before a paused announcement finishes `interrupted`.
    public static let defaultPauseTimeout = Duration.seconds(300)

    private struct Speaking {
        var pending: PendingAnnouncement
        var task: Task<Void, Never>?
        /// Set by the first cancel, interrupt or shutdown; it is the reason it finishes with.
        var stopReason: FinishReason?
        /// Gives up on a speaker that does not stop within `stopTimeout` of being cancelled.
        var watchdog: Task<Void, Never>?
        var pause = PauseState.playing
        /// Finishes a paused announcement after `pauseTimeout`.
        var pauseTimer: Task<Void, Never>?
        /// The `finished` event's detail when it stops for `stopReason`.
        var stopDetail: String?
        /// Lets its progress events through until it finishes.
        var progress: ProgressGate
    }

    private enum PauseState {
        case playing
        /// Asked to pause; the speaker has not answered yet.
        case pausing
        case paused
    }

    private enum Phase {
        case open
        case shuttingDown
        case closed
    }

    /// The most live announcements that may wait (the speaking one is not counted).
    public nonisolated let capacity: Int
    /// The most announcements of each other share (scheduled, SSIP) that may wait, beside
    /// `capacity`.
    public nonisolated let shareCapacity: Int
    /// The named output this queue speaks on; its events and statuses carry it.
    public nonisolated let output: String

    private let speaker: any AnnouncementSpeaker
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let broadcaster: EventBroadcaster
    let ids: AnnouncementIDs
    private let finishedMemory: Int
    private let stopTimeout: Duration
    private let pauseTimeout: Duration?
    private nonisolated let playbackTiming: PlaybackTiming?
    /// How long after a sample leaves this output it is heard (an RTP receiver's buffer): a zone
    /// announcement starts here this much before the zones without one.
    public nonisolated let receiverDelay: Duration

    private var phase = Phase.open
    private var runners = 0
    private var waiting = WaitingList()
    private var speaking: Speaking?
    private var isSpeakerReady = true
    private var availabilityWait: Task<Void, Never>?
    private var acceptedCount: UInt64 = 0

    /// The `finished` events of recently finished announcements, by id.
    private var finished: [String: AnnouncementEvent] = [:]
    /// Ids in `finished`, oldest first, so the memory stays bounded.
    private var finishedOrder: [String] = []
    /// The private announcements among the finished ones it remembers: their status says so.
    private var privateFinished: Set<String> = []
    private var finishWaiters: [String: [UInt64: CheckedContinuation<AnnouncementEvent?, Never>]] = [:]
    private var nextWaiterToken: UInt64 = 0
    private var closedWaiters: [CheckedContinuation<Void, Never>] = []

    /// Creates a queue; it speaks nothing until `run()` is called.
    /// - Parameters:
    ///   - speaker: plays announcements.
    ///   - capacity: how many live announcements may wait, at least 0 (validate user input first).
    ///   - shareCapacity: how many scheduled announcements, and how many SSIP messages, may wait
    ///     beside them, at least 0; nil for `defaultShareCapacity(for:)`.
    ///   - clock: times `expiresAfter`; a cancelled sleep of `ReleasingClock` frees its timer at once.
    ///   - eventHistory: how many recent events `events(after:)` can replay, at least 0.
    ///   - subscriberBuffer: how many live events a subscriber may leave unread before its stream
    ///     ends, at least 1.
    ///   - finishedMemory: how many finished announcements `status(id:)` and `finished(id:)` remember.
    ///   - stopTimeout: how long a cancelled `speak` may take to return. After that the queue
    ///     finishes the announcement anyway, treats the speaker as failed and waits for it to be
    ///     available again, so a wedged device cannot wedge the queue or its shutdown.
    ///   - pauseTimeout: how long an announcement may stay paused before it finishes
    ///     `interrupted`; nil for ever.
    ///   - playbackTiming: told when each announcement's first sample is heard and its last sound ends.
    ///   - output: the name of the output it speaks on, carried by its events and statuses.
    ///   - receiverDelay: how long after a sample leaves it is heard (an RTP output's `delay=`).
    ///   - shared: the event stream and id space it shares with the queues of other outputs
    ///     (`AnnouncementOutputs`); nil gives it its own, sized by `eventHistory` and `subscriberBuffer`.
    ///   - logger: where the queue logs, at info and below.
    public init(
        speaker: any AnnouncementSpeaker,
        capacity: Int = AnnouncementQueue.defaultCapacity,
        shareCapacity: Int? = nil,
        clock: any Clock<Duration> = ReleasingClock(),
        eventHistory: Int = 1024,
        subscriberBuffer: Int = 256,
        finishedMemory: Int = 1024,
        stopTimeout: Duration = AnnouncementQueue.defaultStopTimeout,
        pauseTimeout: Duration? = AnnouncementQueue.defaultPauseTimeout,
        playbackTiming: PlaybackTiming? = nil,
        output: String = AnnouncementOutputs.defaultName,
        receiverDelay: Duration = .zero,
        shared: SharedQueueState? = nil,
        logger: Logger = Logger(label: "speakd.queue")
    ) {
        self.playbackTiming = playbackTiming
        precondition(capacity >= 0, "capacity must not be negative")
        self.speaker = speaker
        self.capacity = capacity
        self.shareCapacity = shareCapacity ?? Self.defaultShareCapacity(for: capacity)
        precondition(self.shareCapacity >= 0, "shareCapacity must not be negative")
        self.clock = clock
        self.output = output
        self.receiverDelay = receiverDelay
        let shared =
            shared ?? SharedQueueState(eventHistory: eventHistory, subscriberBuffer: subscriberBuffer, queues: 1)
        self.broadcaster = shared.broadcaster
        self.ids = shared.ids
        self.finishedMemory = max(0, finishedMemory)
        self.stopTimeout = stopTimeout
        self.pauseTimeout = pauseTimeout
        self.logger = logger
    }

    // MARK: Running

    /// Speaks announcements until the queue shuts down, then returns.
    ///
    /// Cancelling the calling task shuts the queue down. It satisfies swift-service-lifecycle's
    /// `Service.run()` as it is (`extension AnnouncementQueue: @retroactive Service {}`); to shut
    /// down gracefully, run it inside `withGracefulShutdownHandler` and call `shutdown()` there.
    public func run() async {
        guard phase == .open else { return await untilClosed() }
        runners += 1
        logger.debug("announcement queue running", metadata: ["queue.capacity": "\(capacity)"])
        promote()
        await withTaskCancellationHandler {
            await untilClosed()
        } onCancel: {
            Task { await self.shutdown() }
        }
    }

    /// Finishes the speaking and every waiting announcement with `shutdown`, refuses new ones,
    /// and ends the event streams after those events; returns once the speaker has stopped.
    public func shutdown() async {
        guard phase == .open else { return await untilClosed() }
        phase = .shuttingDown
        logger.info("announcement queue shutting down", metadata: ["queue.waiting": "\(waiting.count)"])
        availabilityWait?.cancel()
        availabilityWait = nil
        for pending in waiting.removeAll() {
            finish(pending, reason: .shutdown)
        }
        if speaking != nil {
            stopSpeaking(reason: .shutdown)
        } else {
            close()
        }
        await untilClosed()
        // The last `finished` events are out, and so their records are durable.
        await broadcaster.untilReleased(broadcaster.lastTicket)
    }

    /// True while `run()` is active and the queue has not begun shutting down.
    public var isRunning: Bool { runners > 0 && phase == .open }

    /// False between a speaker failure and the speaker becoming available again.
    public var isSpeakerAvailable: Bool { isSpeakerReady }

    // MARK: Submitting and cancelling

    /// Accepts an announcement, or refuses it without any event.
    ///
    /// When the new one's share of the queue is full (`capacity` for live announcements,
    /// `shareCapacity` for scheduled ones and for SSIP messages), the newest waiting announcement
    /// of that share of the lowest priority below the new one's is discarded (`finished`,
    /// `discarded`) to make room; with none lower, it throws.
    /// - Parameter prepared: the announcement, validated and prepared where it came in
    ///   (`PreparedAnnouncement`); the queue checks none of its values again.
    /// - Returns: its id, whether it is already speaking, and how many will be spoken before it.
    /// - Throws: `AnnouncementQueueError.queueFull` or `.shuttingDown`.
    ///
    /// With a recorder (the audit log), it returns once the `queued` event has gone out, that is
    /// once its record is durable (a `kill -9` right after the answer loses nothing); the queue
    /// takes other calls meanwhile. The caller waits for that off the queue, so the write's end
    /// resumes it where it runs, without a turn on the queue's executor.
    public nonisolated func submit(
        _ prepared: PreparedAnnouncement
    ) async throws(AnnouncementQueueError) -> AnnouncementAccepted {
        let (accepted, ticket) = try await scheduled(prepared)
        await broadcaster.untilReleased(ticket)
        return accepted
    }

    /// Accepts `prepared` (``schedule(_:member:)``) and returns the publish ticket of its newest
    /// event, which its answer waits for.
    private func scheduled(
        _ prepared: PreparedAnnouncement, member: ZoneMember? = nil
    ) throws(AnnouncementQueueError) -> (AnnouncementAccepted, UInt64) {
        let accepted = try schedule(prepared, member: member)
        return (accepted, broadcaster.lastTicket)
    }

    /// Accepts `prepared` into the queue; its `queued` event is published but may still wait for its record.
    /// Accepts this zone's part of an announcement heard in several (`ZoneAnnouncement`), under
    /// the id the zones share; it sends no `queued` or `finished` of its own.
    nonisolated func submit(
        _ prepared: PreparedAnnouncement, member: ZoneMember
    ) async throws(AnnouncementQueueError) -> AnnouncementAccepted {
        let (accepted, ticket) = try await scheduled(prepared, member: member)
        await broadcaster.untilReleased(ticket)
        return accepted
    }

    private func schedule(
        _ prepared: PreparedAnnouncement, member: ZoneMember? = nil
    ) throws(AnnouncementQueueError) -> AnnouncementAccepted {
        guard phase == .open else { throw .shuttingDown }
        let delivery = prepared.delivery
        let startsNow = speaking == nil && canStart
        // What it replaces does not make the queue busy: it goes anyway.
        let replaced = Set(delivery.replaces + [delivery.replaceGroup].compactMap { $0 })
        if delivery.dropIfBusy, isBusy(ignoring: replaced) {
            return drop(prepared, member: member)
        }
        let share = prepared.share
        let places = share == .live ? capacity : shareCapacity
        if !startsNow && waiting.count(in: share) >= places {
            guard let victim = waiting.displacementCandidate(below: delivery.priority, in: share) else {
                logger.debug(
                    "announcement refused, queue full",
                    metadata: ["queue.capacity": "\(places)", "queue.share": "\(share.rawValue)"])
                throw .queueFull(capacity: places, share: share)
            }
            _ = waiting.remove(id: victim.id)
            finish(victim, reason: .discarded)
        }

        acceptedCount += 1
        let announcement = Announcement(
            id: member?.group.id ?? makeID(), speech: prepared.speech, delivery: delivery,
            origin: prepared.origin, prerendered: prepared.prerendered)
        var pending = PendingAnnouncement(announcement: announcement, order: acceptedCount)
        pending.share = share
        pending.member = member
        if member == nil { publish(.queued, pending) }
        if let group = delivery.replaceGroup { replace(group: group, by: announcement.id) }
        for group in delivery.replaces where group != delivery.replaceGroup {
            replace(group: group, by: announcement.id, newer: false)
        }
        if let seconds = delivery.expiresAfter, !startsNow {
            pending.expiry = expiryTimer(id: announcement.id, after: seconds)
        }
        waiting.insert(pending)

        if let current = speaking, current.stopReason == nil, interrupts(pending, current.pending) {
            logger.debug(
                "announcement interrupts",
                metadata: [
                    "announcement.id": "\(announcement.id)", "announcement.interrupted": "\(current.pending.id)",
                ])
            stopSpeaking(reason: .interrupted)
        }
        promote()

        return speaking?.pending.id == announcement.id
            ? AnnouncementAccepted(id: announcement.id, state: .speaking, position: 0)
            : AnnouncementAccepted(
                id: announcement.id, state: .queued, position: position(ofWaiting: announcement.id) ?? 0)
    }

    /// Accepts `prepared` only to finish it `discarded` at once (`dropIfBusy` on a busy queue).
    private func drop(_ prepared: PreparedAnnouncement, member: ZoneMember?) -> AnnouncementAccepted {
        acceptedCount += 1
        let announcement = Announcement(
            id: member?.group.id ?? makeID(), speech: prepared.speech, delivery: prepared.delivery,
            origin: prepared.origin)
        var pending = PendingAnnouncement(announcement: announcement, order: acceptedCount)
        pending.member = member
        if member == nil { publish(.queued, pending) }
        finish(pending, reason: .discarded, detail: "dropped: the queue was busy (dropIfBusy)")
        return AnnouncementAccepted(id: announcement.id, state: .finished, position: 0)
    }

    /// Whether anything speaks (and is not stopping) or waits, other than announcements of `groups`.
    private func isBusy(ignoring groups: Set<String>) -> Bool {
        func counts(_ pending: PendingAnnouncement) -> Bool {
            pending.announcement.delivery.replaceGroup.map { !groups.contains($0) } ?? true
        }
        if let current = speaking, current.stopReason == nil, counts(current.pending) { return true }
        return waiting.items.contains(where: counts)
    }

    /// Finishes every other announcement of `group`, waiting or speaking, `discarded`.
    /// - Parameter newer: whether `id` is itself of `group` (`replaceGroup`) rather than naming
    ///   it in `replaces`; it only changes the detail.
    private func replace(group: String, by id: String, newer: Bool = true) {
        let detail =
            newer
            ? "replaced by \(id), newer in replaceGroup '\(group)'" : "replaced by \(id), which replaces '\(group)'"
        for other in waiting.items where other.announcement.delivery.replaceGroup == group {
            if let removed = waiting.remove(id: other.id) { finish(removed, reason: .discarded, detail: detail) }
        }
        if let current = speaking, current.pending.announcement.delivery.replaceGroup == group {
            stopSpeaking(reason: .discarded, detail: detail)
        }
    }

    /// Cancels one announcement, waiting or speaking; a speaking one stops at once.
    /// - Returns: true when this call cancelled it; false when it has finished or is already
    ///   stopping for another reason.
    /// - Throws: `AnnouncementQueueError.unknownAnnouncement` for an id the queue never had or
    ///   has forgotten, so a client can tell a typo from an announcement that is over.
    @discardableResult
    public func cancel(id: String) throws(AnnouncementQueueError) -> Bool {
        if let current = speaking, current.pending.id == id {
            guard current.stopReason == nil else { return false }
            stopSpeaking(reason: .cancelled)
            return true
        }
        guard let pending = waiting.remove(id: id) else {
            guard finished[id] != nil else { throw .unknownAnnouncement(id) }
            return false
        }
        finish(pending, reason: .cancelled)
        return true
    }

    /// Fails this zone's part of a zone announcement that could not start with the others.
    func withdraw(id: String, detail: String) {
        if let current = speaking, current.pending.id == id {
            stopSpeaking(reason: .failed, detail: detail)
        } else if let pending = waiting.remove(id: id) {
            finish(pending, reason: .failed, detail: detail)
        }
    }

    /// Cancels the speaking and every waiting announcement.
    /// - Returns: how many this call cancelled.
    @discardableResult
    public func cancelAll() -> Int {
        var count = 0
        if let current = speaking, current.stopReason == nil {
            stopSpeaking(reason: .cancelled)
            count += 1
        }
        for pending in waiting.removeAll() {
            finish(pending, reason: .cancelled)
            count += 1
        }
        return count
    }

    // MARK: Pausing

    /// Pauses the speaking announcement: the sound stops at once, or at the end of the current
    /// word, and `paused` is sent once the sink is silent.
    /// - Parameters:
    ///   - id: the announcement, which must be the speaking one; nil for whichever is speaking.
    ///   - atWordEnd: pause where the next word starts rather than at once.
    /// - Returns: its status, `paused`.
    /// - Throws: `unknownAnnouncement` for an id the queue does not know; `notSpeaking` when it
    ///   is waiting, finished, stopping or paused already, or ends before it could pause.
    @discardableResult
    public func pause(id: String? = nil, atWordEnd: Bool = false) async throws(AnnouncementQueueError)
        -> AnnouncementStatus
    {
        let field: String? = id == nil ? nil : "id"
        let current = try speakingOne(id, verb: "paused")
        guard current.pause == .playing else {
            throw .notSpeaking("announcement '\(current.pending.id)' is paused already", field: field)
        }
        let target = current.pending.id
        speaking?.pause = .pausing
        let paused = await speaker.pause(atWordEnd: atWordEnd)
        guard var now = speaking, now.pending.id == target else {
            throw .notSpeaking("announcement '\(target)' finished before it could pause", field: field)
        }
        guard paused, now.stopReason == nil else {
            if now.pause == .pausing { now.pause = .playing }
            speaking = now
            // Still speaking but no sound was playing: before its first sample, between repeats,
            // or after its last word when pausing at a word's end.
            throw .notSpeaking(
                now.stopReason == nil
                    ? "announcement '\(target)' had no sound playing to pause (before its first sample, between repeats, or after its last word); try again"
                    : "announcement '\(target)' finished before it could pause", field: field)
        }
        now.pause = .paused
        if let pauseTimeout {
            now.pauseTimer = timer(after: pauseTimeout) { $0.pauseTimedOut(id: target) }
        }
        speaking = now
        // Paused in a silence before its first sound: it began all the same.
        now.progress.start(heard: Date())
        publish(.paused, now.pending)
        logger.debug("announcement paused", metadata: ["announcement.id": "\(target)"])
        return status(of: now)
    }

    /// Continues the paused announcement from the sample where it stopped; sends `resumed`.
    /// - Parameter id: the announcement, which must be paused; nil for whichever is speaking.
    /// - Returns: its status, `speaking`.
    /// - Throws: `unknownAnnouncement` for an id the queue does not know; `notPaused` when it is
    ///   not paused (waiting, speaking, stopping or finished).
    @discardableResult
    public func resume(id: String? = nil) throws(AnnouncementQueueError) -> AnnouncementStatus {
        let current: Speaking
        do {
            current = try speakingOne(id, verb: "resumed")
        } catch  where error.isNotSpeaking {
            throw .notPaused(error.message, field: error.field)
        }
        guard current.pause == .paused else {
            throw .notPaused("announcement '\(current.pending.id)' is not paused", field: id == nil ? nil : "id")
        }
        current.pauseTimer?.cancel()
        speaking?.pauseTimer = nil
        speaking?.pause = .playing
        _ = speaker.resume()
        publish(.resumed, current.pending)
        logger.debug("announcement resumed", metadata: ["announcement.id": "\(current.pending.id)"])
        return status(of: speaking ?? current)
    }

    /// The speaking announcement if `id` names it (or is nil), not stopping.
    private func speakingOne(_ id: String?, verb: String) throws(AnnouncementQueueError) -> Speaking {
        if let current = speaking, id == nil || current.pending.id == id {
            guard current.stopReason == nil else {
                throw .notSpeaking(
                    "announcement '\(current.pending.id)' is stopping and cannot be \(verb)",
                    field: id == nil ? nil : "id")
            }
            return current
        }
        guard let id else { throw .notSpeaking("nothing is speaking", field: nil) }
        if waiting.index(of: id) != nil {
            throw .notSpeaking("announcement '\(id)' is waiting, not speaking, and cannot be \(verb)")
        }
        if finished[id] != nil {
            throw .notSpeaking("announcement '\(id)' has finished and cannot be \(verb)")
        }
        throw .unknownAnnouncement(id)
    }

    private func pauseTimedOut(id: String) {
        guard let current = speaking, current.pending.id == id, current.pause == .paused else { return }
        logger.info("paused announcement timed out", metadata: ["announcement.id": "\(id)"])
        stopSpeaking(
            reason: .interrupted,
            detail: "paused for longer than the pause timeout (\(pauseTimeout.map { "\($0)" } ?? "none"))")
    }

    // MARK: Looking

    /// The speaking and the waiting announcements, in the order they will be spoken.
    public func snapshot() -> [AnnouncementStatus] {
        var result: [AnnouncementStatus] = []
        if let current = speaking {
            result.append(status(of: current))
        }
        let offset = result.count
        for (index, pending) in waiting.items.enumerated() {
            result.append(status(of: pending, position: offset + index))
        }
        return result
    }

    /// One announcement: waiting, speaking, or recently finished; nil when unknown or forgotten.
    public func status(id: String) -> AnnouncementStatus? {
        if let current = speaking, current.pending.id == id {
            return status(of: current)
        }
        if let index = waiting.index(of: id) {
            return status(of: waiting.items[index], position: index + (speaking == nil ? 0 : 1))
        }
        return finished[id].map(status(of:))
    }

    /// Waits for the `finished` event of `id`.
    /// - Returns: the event (at once when it has finished already); nil for an unknown or
    ///   forgotten id, or when the calling task is cancelled first.
    /// With a recorder (the audit log), the event is returned once it has gone out to the
    /// subscribers, that is once its record is durable; the caller waits for that off the queue.
    public nonisolated func finished(id: String) async -> AnnouncementEvent? {
        let event = await finishedEvent(id: id)
        if event != nil { await broadcaster.untilReleased(broadcaster.lastTicket) }
        return event
    }

    private func finishedEvent(id: String) async -> AnnouncementEvent? {
        if let event = finished[id] {
            return event
        }
        guard speaking?.pending.id == id || waiting.index(of: id) != nil else { return nil }
        let token = nextWaiterToken
        nextWaiterToken += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                finishWaiters[id, default: [:]][token] = continuation
            }
        } onCancel: {
            Task { await self.abandonFinishWait(id: id, token: token) }
        }
    }

    /// Events after sequence number `after` still in history, then live events, until shutdown.
    ///
    /// Never blocks the queue: a subscriber that leaves more than its buffer unread has its
    /// stream ended, and resumes by subscribing again with the last sequence it saw.
    /// - Parameter after: the last sequence seen (SSE `Last-Event-ID`); nil for live events only.
    /// - Parameter progress: whether the stream has progress events (`word`, `sentence`, `mark`)
    ///   as they are heard; they are live only, never replayed.
    public nonisolated func events(after: UInt64? = nil, progress: Bool = false) -> AsyncStream<
        SequencedAnnouncementEvent
    > {
        broadcaster.subscribe(after: after, progress: progress)
    }

    /// Returns once every event published so far has gone out (its record durable).
    nonisolated func untilEventsReleased() async {
        await broadcaster.untilReleased(broadcaster.lastTicket)
    }

    /// The sequence number of the newest event sent, 0 before the first.
    public nonisolated var lastEventSequence: UInt64 { broadcaster.lastSequence }

    /// Sends an event this queue did not make (a session's, a headset's) in its stream.
    nonisolated func broadcast(_ event: AnnouncementEvent) {
        _ = broadcaster.publish(event)
    }

    // MARK: Scheduling

    private var canStart: Bool { phase == .open && runners > 0 && isSpeakerReady }

    private func interrupts(_ pending: PendingAnnouncement, _ current: PendingAnnouncement) -> Bool {
        let new = pending.announcement.delivery
        guard current.priority < .high else { return false }
        // A scheduled or SSIP announcement never cuts off a live one of its own priority.
        if pending.share != .live, current.share == .live, new.priority == current.priority { return false }
        switch new.priority {
        case .high: return true
        case .default: return !new.queue
        case .low: return false
        }
    }

    /// Starts the next waiting announcement when the speaker is free.
    private func promote() {
        guard speaking == nil, canStart, var next = waiting.popFirst() else { return }
        next.expiry?.cancel()
        next.expiry = nil
        let announcement = next.announcement
        // `started` goes out when the first audible sample is heard, or before whatever of the
        // announcement comes first (a word, a pause, its end): never at dequeue, when nothing
        // is heard yet (a cold engine can take seconds).
        let started = startedEvent(for: next)
        let broadcaster = self.broadcaster
        let gate = ProgressGate { heard in
            var started = started
            started.timestamp = heard
            broadcaster.publish(started)
        }
        speaking = Speaking(pending: next, progress: gate)
        logger.debug("announcement started", metadata: ["announcement.id": "\(announcement.id)"])
        let speaker = self.speaker
        let listener = listener(for: next, gate: gate)
        let member = next.member
        let receiverDelay = self.receiverDelay
        speaking?.task = Task {
            let result: Result<SpeechOutcome, any Error>
            do {
                // One zone of several: its speaker waits, silent, until every zone can start.
                if let member {
                    guard let start = await member.group.arrive(zone: member.zone, receiverDelay: receiverDelay)
                    else { throw ZoneStartMissed() }
                    try await Task.sleep(until: start, clock: .continuous)
                }
                result = .success(try await speaker.speak(announcement, listener: listener))
            } catch {
                result = .failure(error)
            }
            self.speakingEnded(id: announcement.id, result: result)
        }
    }

    private func stopSpeaking(reason: FinishReason, detail: String? = nil) {
        guard var current = speaking, current.stopReason == nil else { return }
        current.stopReason = reason
        current.stopDetail = detail
        current.pauseTimer?.cancel()
        let id = current.pending.id
        current.watchdog = timer(after: stopTimeout) { $0.speakerDidNotStop(id: id) }
        speaking = current
        current.task?.cancel()
    }

    private func speakerDidNotStop(id: String) {
        guard let current = speaking, current.pending.id == id, let reason = current.stopReason else { return }
        speaking = nil
        current.progress.close()
        let detail = "the speaker did not stop within \(stopTimeout) of being cancelled"
        logger.info(
            "speaker did not stop", metadata: ["announcement.id": "\(id)", "queue.stop_timeout": "\(stopTimeout)"])
        finish(current.pending, reason: reason, detail: current.stopDetail.map { "\($0); \(detail)" } ?? detail)
        if phase == .shuttingDown {
            close()
        } else {
            waitForSpeaker()
        }
    }

    private func speakingEnded(id: String, result: Result<SpeechOutcome, any Error>) {
        guard let current = speaking, current.pending.id == id else { return }
        current.watchdog?.cancel()
        current.pauseTimer?.cancel()
        speaking = nil
        current.progress.close()
        switch (current.stopReason, result) {
        case (let reason?, _):
            finish(current.pending, reason: reason, detail: current.stopDetail)
        case (nil, .success(let outcome)):
            // Dated by the end of its last sound, which the sink played before `speak` returned.
            finish(current.pending, reason: .completed, voice: outcome.voice, at: current.progress.lastSound)
        case (nil, .failure(let error)) where error is ZoneStartMissed:
            // The speaker never played: nothing to wait for.
            finish(current.pending, reason: .failed, detail: String(describing: error))
        case (nil, .failure(let error)):
            let detail = String(describing: error)
            logger.info(
                "announcement failed; waiting for the speaker",
                metadata: ["announcement.id": "\(id)", "error": "\(detail)"])
            finish(current.pending, reason: .failed, detail: detail)
            waitForSpeaker()
        }
        if phase == .shuttingDown {
            close()
        } else {
            promote()
        }
    }

    private func waitForSpeaker() {
        guard phase == .open else { return }
        isSpeakerReady = false
        availabilityWait?.cancel()
        let speaker = self.speaker
        availabilityWait = Task {
            await speaker.waitUntilAvailable()
            self.speakerAvailable()
        }
    }

    private func speakerAvailable() {
        guard phase == .open, !isSpeakerReady else { return }
        availabilityWait = nil
        isSpeakerReady = true
        logger.info("speaker available again", metadata: ["queue.waiting": "\(waiting.count)"])
        promote()
    }

    private func expiryTimer(id: String, after seconds: Double) -> Task<Void, Never> {
        timer(after: .seconds(seconds)) { $0.expire(id: id) }
    }

    /// A task that calls `fire` on the queue once `delay` has passed on its clock, unless it is
    /// cancelled first.
    private func timer(
        after delay: Duration, then fire: @escaping @Sendable (isolated AnnouncementQueue) -> Void
    ) -> Task<Void, Never> {
        let clock = self.clock
        return Task {
            do {
                try await clock.sleep(for: delay)
            } catch {
                return
            }
            fire(self)
        }
    }

    private func expire(id: String) {
        guard let pending = waiting.remove(id: id) else { return }
        finish(pending, reason: .expired)
    }

    // MARK: Events

    /// What the speaker reports to while it plays `pending`: progress events to the subscribers
    /// that want them, through `gate`, so none follows the announcement's `finished` event.
    private nonisolated func listener(for pending: PendingAnnouncement, gate: ProgressGate) -> SpeechListener {
        let broadcaster = self.broadcaster
        let id = pending.id
        let text = pending.announcement.shownText
        let isPrivate = pending.announcement.delivery.isPrivate
        let priority = pending.priority
        let timing = playbackTiming
        let output = self.output
        return SpeechListener(
            wantsProgress: { broadcaster.hasProgressSubscribers },
            progress: { progress in
                gate.pass {
                    broadcaster.publishProgress {
                        // A private announcement's words and their places in the text stay here.
                        AnnouncementEvent(
                            type: progress.kind, id: id, text: text, priority: priority,
                            timestamp: progress.heardAt.map(wallClockDate) ?? Date(),
                            range: isPrivate ? nil : progress.range, word: isPrivate ? nil : progress.word,
                            name: progress.name, output: output)
                    }
                }
            },
            firstSample: { instant in timing?.firstSample(id, instant) },
            lastSound: { instant in
                gate.noteLastSound(wallClockDate(instant))
                timing?.lastSound(id, instant)
            },
            firstSound: { instant in gate.start(heard: wallClockDate(instant)) })
    }

    /// The `started` event of `pending`, to be sent when it is heard.
    private func startedEvent(for pending: PendingAnnouncement) -> AnnouncementEvent {
        var event = AnnouncementEvent(
            type: .started, id: pending.id, text: pending.announcement.shownText, priority: pending.priority,
            timestamp: Date(), output: output)
        event.origin = pending.announcement.origin
        event.isPrivate = pending.announcement.delivery.isPrivate
        return event
    }

    @discardableResult
    private func publish(
        _ type: AnnouncementEvent.Kind, _ pending: PendingAnnouncement, success: Bool? = nil,
        reason: FinishReason? = nil, voice: String? = nil, detail: String? = nil, at timestamp: Date? = nil,
        send: Bool = true
    ) -> AnnouncementEvent {
        var event = AnnouncementEvent(
            type: type, id: pending.id, text: pending.announcement.shownText, priority: pending.priority,
            timestamp: timestamp ?? Date(), success: success, reason: reason, voice: voice, detail: detail,
            output: output)
        event.origin = pending.announcement.origin
        event.isPrivate = pending.announcement.delivery.isPrivate
        if send { broadcaster.publish(event) }
        return event
    }

    /// Sends the one `finished` event of an announcement that has left the waiting list or the speaker.
    /// - Parameter at: its timestamp, when not now (the end of its last sound).
    private func finish(
        _ pending: PendingAnnouncement, reason: FinishReason, voice: String? = nil, detail: String? = nil,
        at timestamp: Date? = nil
    ) {
        pending.expiry?.cancel()
        let event = publish(
            .finished, pending, success: reason == .completed, reason: reason, voice: voice, detail: detail,
            at: timestamp, send: pending.member == nil)
        // One zone of several: the zone announcement sends the one `finished` once all ended.
        pending.member?.group.zoneEnded(event, zone: output)
        logger.debug(
            "announcement finished", metadata: ["announcement.id": "\(pending.id)", "announcement.reason": "\(reason)"])
        if pending.announcement.delivery.isPrivate, finishedMemory > 0 { privateFinished.insert(pending.id) }
        remember(event)
        if let waiters = finishWaiters.removeValue(forKey: pending.id) {
            for continuation in waiters.values { continuation.resume(returning: event) }
        }
    }

    private func remember(_ event: AnnouncementEvent) {
        guard finishedMemory > 0 else { return ids.release(event.id) }
        finished[event.id] = event
        finishedOrder.append(event.id)
        if finishedOrder.count > finishedMemory {
            let forgotten = finishedOrder.removeFirst()
            finished[forgotten] = nil
            privateFinished.remove(forgotten)
            ids.release(forgotten)
        }
    }

    private func abandonFinishWait(id: String, token: UInt64) {
        finishWaiters[id]?.removeValue(forKey: token)?.resume(returning: nil)
        if finishWaiters[id]?.isEmpty == true { finishWaiters[id] = nil }
    }

    private func close() {
        phase = .closed
        broadcaster.finish()
        for waiters in finishWaiters.values {
            for continuation in waiters.values { continuation.resume(returning: nil) }
        }
        finishWaiters = [:]
        let waiters = closedWaiters
        closedWaiters = []
        for continuation in waiters { continuation.resume() }
        logger.info("announcement queue shut down")
    }

    private func untilClosed() async {
        guard phase != .closed else { return }
        await withCheckedContinuation { closedWaiters.append($0) }
    }

    // MARK: Helpers

    private func status(of current: Speaking) -> AnnouncementStatus {
        var status = status(of: current.pending, position: 0)
        status.state = current.pause == .paused ? .paused : .speaking
        return status
    }

    private func status(of pending: PendingAnnouncement, position: Int) -> AnnouncementStatus {
        AnnouncementStatus(
            id: pending.id, text: pending.announcement.shownText, priority: pending.priority, state: .queued,
            position: position, output: output, private: pending.announcement.delivery.isPrivate ? true : nil)
    }

    /// A finished announcement as its `finished` event describes it.
    private func status(of finished: AnnouncementEvent) -> AnnouncementStatus {
        AnnouncementStatus(
            id: finished.id, text: finished.text, priority: finished.priority, state: .finished,
            success: finished.success, reason: finished.reason, output: output,
            private: privateFinished.contains(finished.id) ? true : nil)
    }

    private func position(ofWaiting id: String) -> Int? {
        waiting.index(of: id).map { $0 + (speaking == nil ? 0 : 1) }
    }

    /// Twelve hex digits: short enough to type, random so ids from before a restart do not collide.
    /// Claimed in the id space shared with the other outputs' queues, so an id names one
    /// announcement whichever queue holds it.
    private func makeID() -> String {
        while true {
            let id = String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
            let padded = String(repeating: "0", count: 12 - id.count) + id
            if ids.claim(padded) { return padded }
        }
    }
}

/// Who is told when announcements are heard: for latency figures.
public struct PlaybackTiming: Sendable {
    /// An announcement's first sample is heard at the instant given.
    public var firstSample: @Sendable (_ id: String, ContinuousClock.Instant) -> Void
    /// An announcement's last sound ended at the instant given (it played to the end).
    public var lastSound: @Sendable (_ id: String, ContinuousClock.Instant) -> Void

    /// - Parameters: see the properties of the same names.
    public init(
        firstSample: @escaping @Sendable (_ id: String, ContinuousClock.Instant) -> Void,
        lastSound: @escaping @Sendable (_ id: String, ContinuousClock.Instant) -> Void
    ) {
        self.firstSample = firstSample
        self.lastSound = lastSound
    }
}

/// Lets an announcement's progress events through until it finishes: closing waits for one
/// being published, so none can follow the `finished` event.
///
/// It sends the announcement's `started` too, once: when its first audible sample is heard
/// (`start()`), or else at a pause or its end; progress that comes before it waits for it. So
/// `started` always comes first and exactly once for an announcement that began, and never
/// before anything is heard (a Piper voice's first word is placed a little ahead of its sound).
final class ProgressGate: Sendable {
    private struct State {
        var open = true
        var started = false
        /// When its last sound ended, the latest the speaker reported.
        var lastSound: Date?
        /// Progress that came before the first audible sample (an engine may place a word a
        /// little ahead of what is heard): sent right after `started`, in order.
        var held: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())
    private let announceStart: @Sendable (_ heard: Date) -> Void

    /// - Parameter announceStart: sends `started`, dated by when it is heard.
    init(announceStart: @escaping @Sendable (_ heard: Date) -> Void) {
        self.announceStart = announceStart
    }

    /// The first audible sample is heard (at `heard`, the sink's estimate): sends `started`
    /// unless it was sent.
    func start(heard: Date) {
        state.withLock { state in
            guard state.open else { return }
            startOnce(&state, heard: heard)
        }
    }

    /// Its last sound (of a stream: each repeat has one) ended at `ended`.
    func noteLastSound(_ ended: Date) {
        state.withLock { $0.lastSound = ended }
    }

    /// When its last sound ended, if the speaker said.
    var lastSound: Date? { state.withLock { $0.lastSound } }

    /// Sends a progress event (`body`), or holds it until `started` has gone out.
    func pass(_ body: @escaping @Sendable () -> Void) {
        state.withLock { state in
            guard state.open else { return }
            if state.started { body() } else { state.held.append(body) }
        }
    }

    /// Sends `started` if it was not, dated now (it ended, or paused, before any sound), and
    /// lets nothing through after.
    func close() {
        state.withLock { state in
            guard state.open else { return }
            startOnce(&state, heard: Date())
            state.open = false
        }
    }

    private func startOnce(_ state: inout State, heard: Date) {
        guard !state.started else { return }
        state.started = true
        announceStart(heard)
        for body in state.held { body() }
        state.held = []
    }
}

/// The wall-clock time of a monotonic instant (a sink's estimate), as event timestamps carry it.
func wallClockDate(_ instant: ContinuousClock.Instant) -> Date {
    let offset = ContinuousClock.now.duration(to: instant)
    let seconds = Double(offset.components.seconds) + Double(offset.components.attoseconds) / 1e18
    return Date(timeIntervalSinceNow: seconds)
}
