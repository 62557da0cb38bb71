import AnnouncementIntake
import AnnouncementQueue
import AnnouncementRecords
import Foundation
import Logging
import ServiceLifecycle
import SpeakAPI
import SpeakSchedules
import SpeakService
import SpeakState
import SpeechModel
import SpeechRendering

/// The schedules: kept in the database, checked like any announcement when they are made, and
/// turned into announcements through the intake when their slots come.
///
/// A slot is marked in the database before its announcement is queued, so a `kill -9` at any
/// moment can lose that one slot's speech but never speaks it twice; the audit log then shows
/// the announcement that was cut short (`failed`, speakd stopped). Between slots the service
/// sleeps on the monotonic clock, in steps of at most `maxSleep`, and plans again from the
/// wall clock after each: a clock step neither fires a burst of passed slots nor skips the next
/// one (`SchedulePlanner`).
///
/// `renderAhead` before a slot, its announcement is checked, prepared and rendered (an espeak-ng
/// render takes milliseconds, a Piper one can take a second), and at the slot the rendered audio
/// is queued: its first audible sample comes as soon after the slot as the output allows. A
/// render that fails then is left to the slot, where the announcement is tried as any other.
///
/// In memory it keeps each schedule's plan only (`Entry`: its times and missed policy, no
/// announcement), so the daemon's memory does not grow with the stored texts: an announcement is
/// read from the database when its slot comes, or when it is rendered ahead. `limits` bound how
/// many schedules there are and how much their definitions take in the database.
public actor ScheduleService: Service {
    /// The longest it sleeps before it reads the wall clock again.
    public static let maxSleep: Duration = .seconds(5)
    /// How long before its slot an announcement is prepared and rendered.
    public static let renderAhead: Duration = .seconds(2)

    /// How many schedules may be stored, and how many bytes their definitions may take together.
    public struct Limits: Sendable, Hashable {
        /// The most schedules; one more is refused with 409 `scheduleLimit` naming `schedules`.
        public var maxSchedules: Int
        /// The most bytes of stored definitions together (their canonical JSON, mostly the
        /// announcements' texts); a schedule that would pass it is refused with 409
        /// `scheduleLimit` naming `announcement`.
        public var maxStoredBytes: Int

        /// 1,000 schedules and 16 MiB, far above what a kiosk's day needs, and a database that
        /// stays small on an SD card.
        public init(maxSchedules: Int = 1_000, maxStoredBytes: Int = 16 * 1024 * 1024) {
            self.maxSchedules = maxSchedules
            self.maxStoredBytes = maxStoredBytes
        }
    }

    /// What the planner keeps of one schedule between slots: no announcement, no name.
    struct Entry: Sendable {
        let id: String
        var plan: SchedulePlan
        var lastSlot: Date?
        /// When the definition was last written. Slots before it (less the planner's lateness)
        /// were never this schedule's to speak: they are not missed, and no `skipped` is sent.
        var since: Date
        /// Counts the definition's changes, so a render ahead of an older one is not kept.
        var revision = 0

        /// Where the planner starts before any slot was fired or skipped: the slots from `since`
        /// less the lateness on (one a moment before the schedule was written is still on time).
        var notBefore: Date {
            since.addingTimeInterval(-Double(SchedulePlanner.defaultLateness.components.seconds) - 1)
        }
    }

    private let store: ScheduleStore
    /// The bounds on the stored schedules.
    public let limits: Limits
    private let intake: AnnouncementIntake
    private let logger: Logger
    private let now: @Sendable () -> Date
    private var entries: [String: Entry]?
    /// The announcements rendered ahead of their slots, by schedule.
    private var ahead: [String: Ahead] = [:]

    private struct Ahead {
        let slot: Date
        /// The request before its session changed it, as the intake remembers it for repeats.
        let request: AnnouncementRequest
        let prepared: PreparedAnnouncement
    }
    /// Whether the next plan is the first since speakd started (the `missed` policy applies).
    private var starting = true
    private var waiter: CheckedContinuation<Void, Never>?
    private var sleeper: Task<Void, Never>?

    /// - Parameters:
    ///   - store: the database's schedules.
    ///   - intake: the way in, for checking and queueing the announcements.
    ///   - logger: the daemon's logger.
    ///   - now: the wall clock.
    ///   - limits: how many schedules, and how many bytes of them, may be stored.
    public init(
        store: ScheduleStore, intake: AnnouncementIntake, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }, limits: Limits = Limits()
    ) {
        self.store = store
        self.limits = limits
        self.intake = intake
        self.logger = logger
        self.now = now
    }

    // MARK: Requests

    /// Makes a schedule from a `POST /v1/schedules` body; it is in the database when this returns.
    /// - Returns: the schedule as `GET` shows it.
    ///
    /// The body may name the schedule's `id` (1 to 64 letters, digits, `.`, `_` or `-`), as a
    /// fleet does so that every kiosk knows it by one id; an id in use is refused (409).
    public func create(_ body: Data) async throws(SpeakError) -> ScheduleResource {
        let (id, decoded): (String?, ScheduleDefinition)
        do {
            (id, decoded) = try ScheduleDefinition.decode(creating: body)
        } catch {
            throw SpeakError(schedule: error)
        }
        let definition = try await checked(decoded)
        let encoded = definition.encoded()
        _ = try await loaded()
        let written: ScheduleWrite
        do {
            written = try await store.insert(definition: encoded, now: now(), id: id, within: room)
        } catch {
            throw SpeakError(state: error)
        }
        guard let stored = try stored(written, adding: encoded.count) else {
            throw SpeakError(.conflict, name: "scheduleExists", "a schedule with id '\(id ?? "")' exists", field: "id")
        }
        entries?[stored.id] = Entry(id: stored.id, plan: definition.plan, lastSlot: nil, since: stored.updated)
        publish(stored.id, ScheduleChange(change: .created))
        wake()
        return resource(stored, definition)
    }

    /// Reads a `POST /v1/schedules` body as `create(_:)` does, with the same checks and the
    /// same refusals, and answers the schedule it would make with its next `count` slots from
    /// now, without storing anything: no id is taken and no room is counted.
    public func preview(_ body: Data, count: Int) async throws(SpeakError) -> SchedulePreview {
        let decoded: ScheduleDefinition
        do {
            decoded = try ScheduleDefinition.decode(creating: body).definition
        } catch {
            throw SpeakError(schedule: error)
        }
        return SchedulePreview(try await checked(decoded), now: now(), count: count)
    }

    /// The room `limits` leave: the store checks it in the transaction that writes, so two
    /// requests at once cannot both take the last room.
    private var room: ScheduleRoom {
        ScheduleRoom(schedules: limits.maxSchedules, bytes: limits.maxStoredBytes)
    }

    /// The schedule a write within ``room`` stored, nil when it changed nothing; refuses a
    /// definition of `bytes` that did not fit (`replacing` one: an update).
    private func stored(_ written: ScheduleWrite, adding bytes: Int, replacing: Bool = false) throws(SpeakError)
        -> StoredSchedule?
    {
        switch written {
        case .stored(let schedule): return schedule
        case .unchanged: return nil
        case .full(let count, let others):
            throw noRoom(count: count, others: others, adding: bytes, replacing: replacing)
        }
    }

    /// Why the store found no room (``ScheduleRoom/fits(count:used:adding:replacing:)``): one
    /// more than `maxSchedules` for a new schedule, else `bytes` more than the `others` stored
    /// leave of `maxStoredBytes`.
    private func noRoom(count: Int, others: Int, adding bytes: Int, replacing: Bool) -> SpeakError {
        if !replacing, count >= limits.maxSchedules {
            return SpeakError(
                .conflict, name: "scheduleLimit",
                "there are \(count) schedules, the most speakd keeps (\(limits.maxSchedules)); delete one first",
                field: "schedules")
        }
        return SpeakError(
            .conflict, name: "scheduleLimit",
            "this schedule takes \(bytes) bytes, and the schedules together may take \(limits.maxStoredBytes) "
                + "(\(others) are taken); shorten its announcement or delete a schedule",
            field: "announcement")
    }

    /// A page of schedules, oldest first, read from the database.
    /// - Parameters:
    ///   - cursor: the `next` of the page before; nil for the first.
    ///   - limit: the most schedules on the page.
    ///   - text: only schedules whose id, name or announcement text contains it, case-insensitively.
    ///   - paused: only paused schedules when true, only active ones when false.
    /// - Returns: the page, and the cursor of the next one when there are more.
    public func list(after cursor: String? = nil, limit: Int = 100, matching text: String? = nil, paused: Bool? = nil)
        async throws(SpeakError) -> (schedules: [ScheduleResource], next: String?)
    {
        if let cursor, !ScheduleStore.isCursor(cursor) {
            throw SpeakError(
                .invalid, name: "invalidValue", "'\(cursor)' is not a cursor: pass the 'next' of the page before",
                field: "after")
        }
        let page: (schedules: [StoredSchedule], next: String?)
        do {
            page = try await store.page(after: cursor, limit: limit, matching: text, paused: paused)
        } catch {
            throw SpeakError(state: error)
        }
        return (page.schedules.compactMap { stored in readable(stored).map { resource(stored, $0) } }, page.next)
    }

    /// One schedule.
    public func schedule(id: String) async throws(SpeakError) -> ScheduleResource {
        let (stored, definition) = try await read(id)
        return resource(stored, definition)
    }

    /// Changes a schedule with a `PATCH` body: the keys it has replace the schedule's, `null`
    /// removes one. Its slots already passed stay passed.
    public func update(id: String, patch: Data) async throws(SpeakError) -> ScheduleResource {
        _ = try await loaded()
        let (_, old) = try await read(id)
        let merged: ScheduleDefinition
        do {
            merged = try old.merging(patch: patch)
        } catch {
            throw SpeakError(schedule: error)
        }
        // A schedule whose slots have passed may still be renamed: its time is checked only
        // when the patch changes it.
        let definition = try await checked(merged, checkingTime: merged.timing != old.timing)
        let encoded = definition.encoded()
        let written: ScheduleWrite
        do {
            written = try await store.update(id: id, definition: encoded, now: now(), within: room)
        } catch {
            throw SpeakError(state: error)
        }
        guard let stored = try stored(written, adding: encoded.count, replacing: true) else {
            throw .unknownSchedule(id)
        }
        var entry =
            entries?[id] ?? Entry(id: id, plan: definition.plan, lastSlot: stored.lastSlot, since: stored.updated)
        entry.plan = definition.plan
        entry.since = stored.updated
        entry.revision += 1
        entries?[id] = entry
        ahead[id] = nil
        publish(id, ScheduleChange(change: .updated))
        wake()
        return resource(stored, definition)
    }

    /// Deletes a schedule; a slot of it already queued is not cancelled.
    public func delete(id: String) async throws(SpeakError) {
        _ = try await loaded()
        let deleted: Bool
        do {
            deleted = try await store.delete(id: id)
        } catch {
            throw SpeakError(state: error)
        }
        guard deleted else { throw .unknownSchedule(id) }
        entries?[id] = nil
        ahead[id] = nil
        publish(id, ScheduleChange(change: .deleted))
        wake()
    }

    /// Checks a definition as of now, and its announcement as the intake checks a posted one
    /// (its output, chimes, text and spans); a private announcement is refused, since its text
    /// would be stored.
    private func checked(
        _ definition: ScheduleDefinition, checkingTime: Bool = true
    ) async throws(SpeakError) -> ScheduleDefinition {
        do {
            if checkingTime { try definition.check(now: now()) }
        } catch {
            throw SpeakError(schedule: error)
        }
        let request = definition.request
        do {
            try request.utterance.validate(limits: intake.limits.utterance)
        } catch {
            throw SpeakError(announcement: .invalid(Self.namingTextField(error, of: definition)))
        }
        do {
            _ = try await intake.prepare(request)
        } catch {
            throw SpeakError(announcement: error)
        }
        guard !request.delivery.isPrivate else {
            throw SpeakError(
                .invalid, name: "invalidValue",
                "a scheduled announcement cannot be private: its text would be stored in the database",
                field: "announcement.private")
        }
        return definition
    }

    /// A limit's error naming the field the client wrote the text in: `ssml` or `sequence`
    /// rather than the `spans` they became.
    private static func namingTextField(_ error: SpeechInputError, of definition: ScheduleDefinition)
        -> SpeechInputError
    {
        guard error.kind == "tooLarge", case .object(let object) = definition.announcementJSON else { return error }
        for key in ["sequence", "ssml"] where object[key] != nil { return error.renamed(field: key) }
        return error
    }

    /// The plans of every schedule, read once from the database: without their announcements,
    /// which SQLite leaves out (`ScheduleStore.plans()`).
    ///
    /// The read suspends: when two calls read at once, the first to finish keeps its plans and
    /// the second takes them, so a schedule created meanwhile is not lost from memory.
    private func loaded() async throws(SpeakError) -> [String: Entry] {
        if let entries { return entries }
        var loaded: [String: Entry] = [:]
        let all: [StoredPlan]
        do {
            all = try await store.plans()
        } catch {
            throw SpeakError(state: error)
        }
        if let entries { return entries }
        for stored in all {
            do {
                loaded[stored.id] = Entry(
                    id: stored.id, plan: try SchedulePlan(json: stored.plan), lastSlot: stored.lastSlot,
                    since: stored.updated)
            } catch {
                logger.error(
                    "a stored schedule cannot be read; it is left out",
                    metadata: ["speakd.schedule": "\(stored.id)", "speakd.error": "\(error)"])
            }
        }
        entries = loaded
        return loaded
    }

    /// A schedule and its definition, from the database.
    private func read(_ id: String) async throws(SpeakError) -> (StoredSchedule, ScheduleDefinition) {
        let found: StoredSchedule?
        do {
            found = try await store.get(id: id)
        } catch {
            throw SpeakError(state: error)
        }
        guard let stored = found, let definition = readable(stored) else { throw .unknownSchedule(id) }
        return (stored, definition)
    }

    /// A stored schedule's definition; nil, and logged, when it cannot be read.
    private func readable(_ stored: StoredSchedule) -> ScheduleDefinition? {
        do {
            return try ScheduleDefinition(json: stored.definition)
        } catch {
            logger.error(
                "a stored schedule cannot be read; it is left out",
                metadata: ["speakd.schedule": "\(stored.id)", "speakd.error": "\(error)"])
            return nil
        }
    }

    /// The announcement of a schedule, read from the database when its slot comes.
    private func request(of entry: Entry) async throws(SpeakError) -> AnnouncementRequest {
        try await read(entry.id).1.request
    }

    private func resource(_ stored: StoredSchedule, _ definition: ScheduleDefinition) -> ScheduleResource {
        // The slot the planner last recorded, which is newer than the row when its write failed.
        let lastSlot = entries?[stored.id]?.lastSlot ?? stored.lastSlot
        return ScheduleResource(
            id: stored.id, definition: definition, created: stored.created, updated: stored.updated,
            lastSlot: lastSlot, next: Self.next(definition.plan, lastSlot: lastSlot, now: now()))
    }

    /// The next slot to come: the first at or after now and after the last that came (slots
    /// passed while the service had not yet planned are not next, whatever `lastSlot` says yet).
    static func next(_ plan: SchedulePlan, lastSlot: Date?, now: Date) -> Date? {
        let timeline = plan.timeline
        guard let next = timeline.firstSlot(atOrAfter: now) else { return nil }
        guard let last = lastSlot, next <= last else { return next }
        return timeline.nextSlot(after: last)
    }

    private func publish(_ id: String, _ change: ScheduleChange) {
        var event = AnnouncementEvent(type: .schedule, id: id, text: "", priority: .default, timestamp: Date())
        event.schedule = change
        intake.outputs.publish(event)
    }

    // MARK: Running

    public nonisolated func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.runLoop()
        }
    }

    private func runLoop() async {
        while !Task.isCancelled {
            let wait = await step()
            await pause(for: wait)
        }
    }

    /// Acts on every schedule whose slot is due or passed; returns how long to sleep.
    private func step() async -> Duration {
        let schedules: [String: Entry]
        do {
            schedules = try await loaded()
        } catch {
            logger.error("schedules cannot be read", metadata: ["speakd.error": "\(error)"])
            return Self.maxSleep
        }
        let reason: SchedulePlanner.Reason = starting ? .start : .running
        starting = false
        var earliest: Date?
        for id in schedules.keys.sorted() {
            // Acting on one can take a while (the intake); read the newest entry each time.
            while let entry = entries?[id] {
                let at = now()
                let decision = SchedulePlanner(entry.plan).decide(
                    lastSlot: entry.lastSlot ?? entry.notBefore, now: at, reason: reason)
                switch decision {
                case .fire(let slot):
                    await fire(entry, slot: slot)
                    continue
                case .skip(let through):
                    await mark(entry, slot: through)
                    publish(
                        entry.id,
                        ScheduleChange(change: .skipped, slot: ScheduleResource.text(through), detail: "missed"))
                    continue
                case .pass(let slot):
                    await mark(entry, slot: slot)
                    publish(
                        entry.id, ScheduleChange(change: .skipped, slot: ScheduleResource.text(slot), detail: "paused"))
                    if entry.plan.timeline.nextSlot(after: slot) == nil {
                        publish(entry.id, ScheduleChange(change: .finished))
                    }
                    continue
                case .wait(let until):
                    // A paused schedule's slots are not spoken, so not rendered either.
                    if !entry.plan.paused, ahead[id]?.slot != until,
                        until.timeIntervalSince(at) <= Self.renderAheadSeconds
                    {
                        await render(entry, slot: until)
                    }
                    // Woken to render ahead, then at the slot itself (a paused one only at the slot).
                    let wake =
                        entry.plan.paused || ahead[id]?.slot == until
                        ? until : until.addingTimeInterval(-Self.renderAheadSeconds)
                    earliest = min(earliest ?? wake, wake)
                case .finished:
                    break
                }
                break
            }
        }
        guard let earliest else { return .seconds(3_600) }
        return SchedulePlanner.sleepDuration(until: earliest, now: now(), maxChunk: Self.maxSleep)
    }

    private static var renderAheadSeconds: Double {
        Double(renderAhead.components.seconds) + Double(renderAhead.components.attoseconds) / 1e18
    }

    private static func origin(_ id: String, slot: Date) -> AnnouncementOrigin {
        AnnouncementOrigin(front: "schedule", detail: "id=\(id) slot=\(ScheduleResource.text(slot))", schedule: id)
    }

    /// Checks, prepares and renders the announcement of `slot` now, keeping it for the slot.
    private func render(_ entry: Entry, slot: Date) async {
        let id = entry.id
        ahead[id] = nil
        do {
            let request = try await request(of: entry)
            var prepared = try await intake.prepare(await intake.sessions.personalize(request))
            prepared.origin = Self.origin(id, slot: slot)
            var chunks: [PCMChunk] = []
            for try await chunk in intake.renderer.render(prepared.speech) { chunks.append(chunk) }
            prepared.prerendered = chunks
            // Changed or deleted meanwhile: not kept.
            guard entries?[id]?.revision == entry.revision else { return }
            ahead[id] = Ahead(slot: slot, request: request, prepared: prepared)
        } catch {
            logger.debug(
                "a scheduled announcement could not be rendered ahead; it is tried at its slot",
                metadata: ["speakd.schedule": "\(id)", "speakd.error": "\(error)"])
        }
    }

    /// Marks the slot, then queues its announcement through the intake: the one rendered ahead
    /// when there is one for this slot.
    private func fire(_ entry: Entry, slot: Date) async {
        let id = entry.id
        let early = ahead.removeValue(forKey: id).flatMap { $0.slot == slot ? $0 : nil }
        guard await mark(entry, slot: slot) else { return }
        do {
            let accepted: AnnouncementAccepted
            if let early {
                accepted = try await intake.submit(ahead: early.prepared, original: early.request)
            } else {
                accepted = try await intake.accept(try await request(of: entry), origin: Self.origin(id, slot: slot))
                    .accepted
            }
            publish(id, ScheduleChange(change: .fired, slot: ScheduleResource.text(slot), announcement: accepted.id))
        } catch {
            logger.info(
                "scheduled announcement refused",
                metadata: ["speakd.schedule": "\(id)", "speakd.error": "\(error)"])
            publish(id, ScheduleChange(change: .skipped, slot: ScheduleResource.text(slot), detail: "\(error)"))
        }
        if entry.plan.timeline.nextSlot(after: slot) == nil {
            publish(id, ScheduleChange(change: .finished))
        }
    }

    /// Records that `slot` has come, durably; false when it cannot be written, and the slot is
    /// then not spoken (it could be again after a restart).
    @discardableResult
    private func mark(_ entry: Entry, slot: Date) async -> Bool {
        do {
            try await store.markSlot(id: entry.id, slot: slot)
        } catch {
            logger.error(
                "a schedule's slot cannot be recorded; it is not spoken",
                metadata: ["speakd.schedule": "\(entry.id)", "speakd.error": "\(error)"])
            // Not marked in memory either, so the loop does not spin: the planner sees it passed.
            entries?[entry.id]?.lastSlot = slot
            return false
        }
        entries?[entry.id]?.lastSlot = slot
        return true
    }

    private func pause(for duration: Duration) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter = continuation
                sleeper = Task {
                    try? await Task.sleep(for: duration, tolerance: .zero, clock: .continuous)
                    await self.wake()
                }
            }
        } onCancel: {
            Task { await self.wake() }
        }
    }

    private func wake() {
        sleeper?.cancel()
        sleeper = nil
        waiter?.resume()
        waiter = nil
    }
}
