import FoundationEssentials
import SpeakAPI
import Synchronization

/// One announcement heard in several outputs (zones) at once: one id, one `queued`, one
/// `finished`, and a start barrier between the zones' queues.
///
/// Each zone's queue holds its own member of it and treats that member by its own rules: it
/// waits behind that zone's speaking announcement or interrupts it by priority, and expires,
/// is cancelled or is interrupted there like any other. When a zone's queue starts its member,
/// the member waits at the barrier (holding that zone's speaker, silent) until every zone has
/// started it or can no longer (finished there before it started); then all start together,
/// each zone `receiverDelay` early so that they are heard at one instant.
///
/// The barrier is bounded: once one zone waits at it, the others have `startTimeout` to join.
/// A zone that has not joined by then (its queue busy with something it will not interrupt, its
/// speaker down) finishes the announcement `failed` there, and the zones that joined start
/// without it. A zone whose queue refused it (full, its sink down) is failed from the start.
///
/// The member's own `queued` and `finished` events are not sent: this sends one of each for
/// the id, and the `finished` (after the last zone finished) says how each zone ended in
/// `outputs`; `success` is true only when every zone completed.
final class ZoneAnnouncement: Sendable {
    /// Time between the barrier opening and the first zone's sound: room for every zone's task
    /// to wake and its sink to take the first samples.
    static let startMargin = Duration.milliseconds(30)

    let id: String
    /// The zones in the order the request named them.
    let zones: [String]
    let startTimeout: Duration
    private let template: AnnouncementEvent
    private let publish: @Sendable (AnnouncementEvent) -> Void
    /// Fails the member of a zone that did not join in time (in that zone's queue).
    private let withdraw: @Sendable (_ zone: String, _ detail: String) -> Void

    private struct State {
        var sealed = false
        var arrived: [String: (delay: Duration, continuation: Waiter)] =
            [:]
        /// Zones that cannot join any more: finished (or refused) before they started.
        var absent: Set<String> = []
        /// The instant every zone is heard from, once the barrier opened.
        var start: ContinuousClock.Instant?
        var timer: Task<Void, Never>?
        var outcomes: [String: ZoneOutcome] = [:]
        var zoneEvents: [String: AnnouncementEvent] = [:]
        var finished: AnnouncementEvent?
        var waiters: [CheckedContinuation<AnnouncementEvent, Never>] = []
    }
    private let state = Mutex(State())
    private typealias Waiter = CheckedContinuation<ContinuousClock.Instant?, Never>

    /// - Parameters:
    ///   - id: the announcement's one id, claimed already.
    ///   - zones: the outputs, in the request's order.
    ///   - template: its `queued` event (text, priority, origin); `finished` is made from it.
    ///   - startTimeout: how long the zones that joined the barrier wait for the others.
    ///   - publish: sends an event in the one stream.
    ///   - withdraw: fails a zone's member in that zone's queue.
    init(
        id: String, zones: [String], template: AnnouncementEvent, startTimeout: Duration,
        publish: @escaping @Sendable (AnnouncementEvent) -> Void,
        withdraw: @escaping @Sendable (_ zone: String, _ detail: String) -> Void
    ) {
        self.id = id
        self.zones = zones
        self.template = template
        self.startTimeout = startTimeout
        self.publish = publish
        self.withdraw = withdraw
    }

    /// Every zone's queue has its member (or refused it) and `queued` went out: the barrier may open.
    func seal() {
        let opened = state.withLock { state -> [Waiter] in
            state.sealed = true
            return openIfComplete(&state)
        }
        resume(opened)
        finishIfComplete()
    }

    /// Waits at the barrier as `zone`'s member starts; returns when its sound should begin
    /// (the common start less `receiverDelay`), or nil when it may not start any more (too late,
    /// or cancelled while waiting).
    func arrive(zone: String, receiverDelay: Duration) async -> ContinuousClock.Instant? {
        let start: ContinuousClock.Instant? = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (refused, opened) = state.withLock { state -> (Bool, [Waiter]) in
                    guard state.start == nil, !state.absent.contains(zone), !Task.isCancelled else {
                        state.absent.insert(zone)
                        return (true, openIfComplete(&state))
                    }
                    state.arrived[zone] = (receiverDelay, continuation)
                    if state.timer == nil { state.timer = startTimer() }
                    return (false, openIfComplete(&state))
                }
                if refused { continuation.resume(returning: nil) }
                resume(opened)
            }
        } onCancel: {
            let (left, opened) = state.withLock { state -> (Waiter?, [Waiter]) in
                guard state.start == nil, let waiting = state.arrived.removeValue(forKey: zone) else {
                    return (nil, [])
                }
                state.absent.insert(zone)
                return (waiting.continuation, openIfComplete(&state))
            }
            left?.resume(returning: nil)
            resume(opened)
        }
        guard let start else { return nil }
        return start - receiverDelay
    }

    /// `zone`'s member finished there (its queue's `finished`, not sent): recorded, and the
    /// one `finished` is sent once every zone has one.
    func zoneEnded(_ event: AnnouncementEvent, zone: String) {
        let opened = state.withLock { state -> [Waiter] in
            state.outcomes[zone] = ZoneOutcome(output: zone, reason: event.reason ?? .failed, detail: event.detail)
            state.zoneEvents[zone] = event
            guard state.start == nil, state.arrived[zone] == nil else { return [] }
            state.absent.insert(zone)
            return openIfComplete(&state)
        }
        resume(opened)
        finishIfComplete()
    }

    /// `zone`'s queue refused its member: it fails there from the start.
    func zoneRefused(_ zone: String, detail: String) {
        state.withLock { state in
            state.outcomes[zone] = ZoneOutcome(output: zone, reason: .failed, detail: detail)
            state.absent.insert(zone)
        }
    }

    /// Its one `finished` event, once every zone ended.
    func finished() async -> AnnouncementEvent {
        await withCheckedContinuation { continuation in
            let event = state.withLock { state -> AnnouncementEvent? in
                if let event = state.finished { return event }
                state.waiters.append(continuation)
                return nil
            }
            if let event { continuation.resume(returning: event) }
        }
    }

    /// The `finished` event, if it went out.
    var finishedEvent: AnnouncementEvent? { state.withLock { $0.finished } }

    /// Opens the barrier when it is sealed and no zone is still to come; returns who to resume
    /// (with `state.start`, or nil for none).
    private func openIfComplete(_ state: inout State) -> [Waiter] {
        guard state.sealed, state.start == nil else { return [] }
        let pending = zones.filter { state.arrived[$0] == nil && !state.absent.contains($0) }
        guard pending.isEmpty, !state.arrived.isEmpty else { return [] }
        let lead = state.arrived.values.map(\.delay).max() ?? .zero
        state.start = .now + Self.startMargin + lead
        state.timer?.cancel()
        state.timer = nil
        let continuations = state.arrived.values.map(\.continuation)
        state.arrived = [:]
        return continuations
    }

    private func resume(_ continuations: [Waiter]) {
        let start = state.withLock { $0.start }
        for continuation in continuations { continuation.resume(returning: start) }
    }

    private func startTimer() -> Task<Void, Never> {
        let timeout = startTimeout
        return Task { [weak self] in
            do {
                try await Task.sleep(for: timeout)
            } catch {
                return
            }
            self?.startTimedOut()
        }
    }

    /// The bound: the zones that have not joined fail there, the rest start.
    private func startTimedOut() {
        let (late, opened) = state.withLock {
            state -> ([String], [Waiter]) in
            guard state.start == nil else { return ([], []) }
            let late = zones.filter { state.arrived[$0] == nil && !state.absent.contains($0) }
            state.absent.formUnion(late)
            state.timer = nil
            return (late, openIfComplete(&state))
        }
        resume(opened)
        let detail =
            "this zone could not start within \(startTimeout) of the first zone being ready; the others started without it"
        for zone in late { withdraw(zone, detail) }
    }

    private func finishIfComplete() {
        let done = state.withLock { state -> (AnnouncementEvent, [CheckedContinuation<AnnouncementEvent, Never>])? in
            guard state.sealed, state.finished == nil, zones.allSatisfy({ state.outcomes[$0] != nil }) else {
                return nil
            }
            let outcomes = zones.compactMap { state.outcomes[$0] }
            var event = template
            event.type = .finished
            let failed = outcomes.first { $0.reason != .completed }
            event.success = failed == nil
            event.reason = failed?.reason ?? .completed
            event.detail = failed.map { "\($0.output): \($0.reason.rawValue)" + ($0.detail.map { " (\($0))" } ?? "") }
            event.outputs = outcomes
            // Dated by the last zone to end; the voice is the first zone's that says.
            event.timestamp = state.zoneEvents.values.map(\.timestamp).max() ?? Date()
            let zoneEvents = state.zoneEvents
            event.voice = zones.lazy.compactMap { zoneEvents[$0]?.voice }.first
            state.finished = event
            state.timer?.cancel()
            state.timer = nil
            let waiters = state.waiters
            state.waiters = []
            return (event, waiters)
        }
        guard let (event, waiters) = done else { return }
        publish(event)
        for waiter in waiters { waiter.resume(returning: event) }
    }
}

/// A zone queue's part of a `ZoneAnnouncement`.
struct ZoneMember: Sendable {
    let group: ZoneAnnouncement
    let zone: String
}

/// A zone's member that may not start: the barrier opened without it, or it left.
struct ZoneStartMissed: Error, CustomStringConvertible {
    var description: String {
        "this zone was not ready when the other zones started"
    }
}
