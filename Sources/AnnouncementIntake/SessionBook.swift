import AnnouncementQueue
import FoundationEssentials
import PosixSupport
import SpeakAPI
import SpeakService
import SpeechModel

/// The sessions of the outputs (at most one each) and what each output remembers for "say it
/// again": the intake's record of the person at the terminal (docs/session.md).
///
/// A session ends by `end`, by a `replace`, or by itself once `idleTimeout` passes without an
/// announcement, a repeat or a change on it. Each output remembers its last
/// `rememberedPerOutput` announcements that were heard (finished `completed` or `interrupted`),
/// as their requests were before any session changed them, so a repeat is heard at the
/// session's preferences of the moment. When a session ends, its output and the output it moved
/// announcements to forget them.
public actor SessionBook {
    /// How many heard announcements each output remembers for repeats.
    public static let rememberedPerOutput = ServiceLimits.maximumRepeatCount

    /// An announcement kept for a repeat.
    public struct Remembered: Sendable {
        /// Its id.
        public var id: String
        /// Its request as it was before a session changed it.
        public var request: AnnouncementRequest
        /// The output it was heard on.
        public var output: String
    }

    private struct Session {
        var id: String
        var output: String
        var preferences: SessionPreferences
        /// When it ends unless refreshed first, on `timeline`.
        var idleAt: Duration = .zero
        /// Waits for `idleAt`, which a refresh moves without starting another.
        var timer: Task<Void, Never>?
    }

    private let outputs: AnnouncementOutputs
    private let timeline: Timeline
    private var sessions: [String: Session] = [:]
    /// By the output an announcement was heard on, oldest first.
    private var memory: [String: [Remembered]] = [:]
    /// Raised when an output forgets, so an announcement finishing after that is not remembered.
    private var memoryEpochs: [String: UInt64] = [:]
    /// Private outputs whose headphones are known to be out.
    private var headsetsOut: Set<String> = []

    /// - Parameters:
    ///   - outputs: the outputs sessions may be on, whose events carry the session events.
    ///   - clock: times the idle timeouts.
    public init(outputs: AnnouncementOutputs, clock: any Clock<Duration> = ReleasingClock()) {
        self.outputs = outputs
        self.timeline = Timeline(clock)
    }

    // MARK: Sessions

    /// Every output's session, in the order of the outputs.
    public func list() -> [SessionStatus] {
        outputs.names.compactMap { sessions[$0].map(status(of:)) }
    }

    /// Starts or changes the session `request` names (`PUT /v1/session`).
    /// - Parameter privateOutputs: the outputs configured private; a private session must be
    ///   heard on one.
    /// - Throws: `SpeakError` naming the field: an unknown output or `moveTo` (422), an `id`
    ///   that is not the output's session (404), `private` on a session not heard on a private
    ///   output (422).
    @discardableResult
    public func put(_ request: SessionRequest, privateOutputs: Set<String> = []) throws(SpeakError) -> SessionChange {
        let output = try sessionOutput(request)
        if let moveTo = request.moveTo ?? nil {
            try requireOutput(moveTo, field: "moveTo")
            guard moveTo != output else {
                throw .scheduling(
                    .invalidValue(field: "moveTo", message: "moveTo '\(moveTo)' is the session's own output"))
            }
        }
        // The preferences the session will have: a replaced or new one starts from the defaults.
        let base = request.replace ? nil : sessions[output]?.preferences
        let asked = (base ?? SessionPreferences()).changed(by: request)
        if asked.isPrivate, !privateOutputs.contains(asked.moveTo ?? output) {
            throw .invalidValue(
                field: "private",
                "a private session is heard on a private output, and '\(asked.moveTo ?? output)' is not one: "
                    + "move to one (moveTo) or start the session on one"
                    + (privateOutputs.isEmpty
                        ? " (none is configured)" : " (\(privateOutputs.sorted().joined(separator: ", ")))"))
        }
        if request.replace, let current = sessions[output] {
            end(current, reason: .replaced)
        }
        let change: SessionChange.Kind
        var session: Session
        if let current = sessions[output] {
            session = current
            session.preferences = asked
            change = .changed
        } else {
            session = Session(id: Self.makeID(), output: output, preferences: asked)
            change = .started
        }
        sessions[output] = session
        refresh(output)
        return publish(SessionChange(change: change, session: status(of: session)))
    }

    /// Ends the session of `output`, or the one with `id` (`DELETE /v1/session`).
    /// - Throws: `SpeakError`: 404 naming `id` or `output` when there is no such session,
    ///   422 naming `output` for an output that does not exist.
    @discardableResult
    public func end(output: String? = nil, id: String? = nil) throws(SpeakError) -> SessionChange {
        let session: Session
        if let id {
            guard let found = sessions.values.first(where: { $0.id == id }), output == nil || found.output == output
            else { throw Self.unknownSession(id: id) }
            session = found
        } else {
            let output = output ?? AnnouncementOutputs.defaultName
            try requireOutput(output, field: "output")
            guard let found = sessions[output] else {
                throw .unknown(
                    field: "output", code: ErrorResponse.Code.unknownSession, "output '\(output)' has no session")
            }
            session = found
        }
        return end(session, reason: .ended)
    }

    /// Ends the session a body names by its `output` or `id` alone (an MQTT end command).
    /// - Throws: `SpeakError`: any other key is refused by name (422); see `end(output:id:)`.
    @discardableResult
    public func end(endOnly request: SessionRequest) throws(SpeakError) -> SessionChange {
        let others: [(String, Bool)] = [
            ("replace", request.replace), ("rate", request.rate != nil), ("volume", request.volume != nil),
            ("language", request.language != nil), ("voice", request.voice != nil),
            ("moveTo", request.moveTo != nil), ("idleTimeout", request.idleTimeout != nil),
        ]
        if let (field, _) = others.first(where: \.1) {
            throw .invalid(.unsupported(field: field, "ending a session takes only output or id; leave '\(field)' out"))
        }
        return try end(output: request.output, id: request.id)
    }

    /// `request` as the session of the output it addresses wants it heard; refreshes that
    /// session's idle timeout. A request moved to another output gets the session of the output
    /// it addressed only, not that of the output it moved to.
    public func personalize(_ request: AnnouncementRequest) -> AnnouncementRequest {
        let addressed = request.output ?? AnnouncementOutputs.defaultName
        guard let session = sessions[addressed] else { return request }
        refresh(addressed)
        return session.preferences.apply(to: request, headsetOut: headsetsOut.contains(Self.heardOn(session)))
    }

    /// Headphones were plugged into (`present` true) or pulled out of (false) private output
    /// `output`, or its sink no longer says (nil, which counts as not out). Each session heard
    /// there whose move and privacy wait or resume because of it is `changed`.
    public func headset(output: String, present: Bool?) {
        let out = present == false
        guard out != headsetsOut.contains(output) else { return }
        if out { headsetsOut.insert(output) } else { headsetsOut.remove(output) }
        for session in sessions.values where Self.heardOn(session) == output {
            _ = publish(SessionChange(change: .changed, session: status(of: session)))
        }
    }

    /// The output a session's announcements are heard on when its move applies.
    private static func heardOn(_ session: Session) -> String {
        session.preferences.moveTo ?? session.output
    }

    // MARK: Memory

    /// Notes an accepted announcement, to be remembered for repeats once it has been heard.
    /// - Parameters:
    ///   - id: its id.
    ///   - original: its request before a session changed it.
    ///   - output: the output it was queued on.
    public func accepted(id: String, original: AnnouncementRequest, output: String) {
        let epoch = memoryEpochs[output, default: 0]
        let outputs = self.outputs
        Task {
            // The queue's own record: a finish is never missed for a slow event reader.
            guard let finished = await outputs.finished(id: id) else { return }
            self.finished(
                Remembered(id: id, request: original, output: output), reason: finished.reason, epoch: epoch)
        }
    }

    private func finished(_ remembered: Remembered, reason: FinishReason?, epoch: UInt64) {
        guard reason == .completed || reason == .interrupted, memoryEpochs[remembered.output, default: 0] == epoch
        else { return }
        var list = memory[remembered.output, default: []]
        list.append(remembered)
        if list.count > Self.rememberedPerOutput { list.removeFirst(list.count - Self.rememberedPerOutput) }
        memory[remembered.output] = list
    }

    /// The remembered announcement `id`.
    public func remembered(id: String) -> Remembered? {
        for list in memory.values {
            if let found = list.last(where: { $0.id == id }) { return found }
        }
        return nil
    }

    /// The last `count` announcements heard on `output`, oldest first.
    public func last(_ count: Int, heardOn output: String) -> [Remembered] {
        Array(memory[output, default: []].suffix(count))
    }

    // MARK: Helpers

    private func sessionOutput(_ request: SessionRequest) throws(SpeakError) -> String {
        if let id = request.id {
            guard let found = sessions.values.first(where: { $0.id == id }),
                request.output == nil || request.output == found.output
            else { throw Self.unknownSession(id: id) }
            return found.output
        }
        let output = request.output ?? AnnouncementOutputs.defaultName
        try requireOutput(output, field: "output")
        return output
    }

    private func requireOutput(_ name: String, field: String) throws(SpeakError) {
        guard outputs.queue(named: name) != nil else {
            throw .scheduling(
                .invalidValue(
                    field: field,
                    message: "no output is called '\(name)'; this speakd has \(outputs.names.joined(separator: ", "))"))
        }
    }

    private static func unknownSession(id: String) -> SpeakError {
        .unknown(
            field: "id", code: ErrorResponse.Code.unknownSession,
            "no session has id '\(id)'; it ended (ended, idle or replaced) or never began")
    }

    /// Restarts the idle timeout of the session of `output`. One timer per session waits for
    /// it: a refresh moves the instant the timer waits for, so a flood of announcements starts no
    /// task and no timer each (a cancelled sleep keeps its timer, and its task's memory, until
    /// its deadline).
    private func refresh(_ output: String) {
        guard var session = sessions[output] else { return }
        let timeout = Duration.milliseconds(Int64((session.preferences.idleTimeout * 1000).rounded()))
        session.idleAt = timeline.now() + timeout
        if session.timer == nil {
            let id = session.id
            session.timer = Task { await self.endWhenIdle(output: output, id: id) }
        }
        sessions[output] = session
    }

    /// Ends session `id` of `output` once its `idleAt` has passed without a refresh moving it;
    /// returns when the session has ended otherwise, or the task is cancelled.
    private func endWhenIdle(output: String, id: String) async {
        while let session = sessions[output], session.id == id {
            guard timeline.now() < session.idleAt else {
                end(session, reason: .idle)
                return
            }
            do {
                try await timeline.sleep(until: session.idleAt)
            } catch {
                return
            }
        }
    }

    @discardableResult
    private func end(_ session: Session, reason: SessionChange.EndReason) -> SessionChange {
        session.timer?.cancel()
        let ended = status(of: session)
        sessions[session.output] = nil
        for output in [session.output, session.preferences.moveTo].compactMap(\.self) {
            memory[output] = nil
            memoryEpochs[output, default: 0] += 1
        }
        return publish(SessionChange(change: .ended, reason: reason, session: ended))
    }

    private func publish(_ change: SessionChange) -> SessionChange {
        var event = AnnouncementEvent(
            type: .session, id: change.session.id, text: "", priority: .default, timestamp: Date(),
            output: change.session.output)
        event.session = change
        outputs.publish(event)
        return change
    }

    private func status(of session: Session) -> SessionStatus {
        let preferences = session.preferences
        let remembered = [session.output, preferences.moveTo].compactMap(\.self)
            .reduce(0) { $0 + (memory[$1]?.count ?? 0) }
        return SessionStatus(
            id: session.id, output: session.output, rate: preferences.rate, volume: preferences.volume,
            language: preferences.language?.description, voice: preferences.voice, moveTo: preferences.moveTo,
            idleTimeout: preferences.idleTimeout, remembered: remembered, isPrivate: preferences.isPrivate ? true : nil,
            headsetOut: headsetsOut.contains(Self.heardOn(session)) ? true : nil)
    }

    /// Twelve hex digits, like an announcement's id.
    private static func makeID() -> String {
        let id = String(UInt64.random(in: 0..<(1 << 48)), radix: 16)
        return String(repeating: "0", count: 12 - id.count) + id
    }
}

/// The book's clock, read as the time since the book was made: the idle deadlines are kept as
/// durations on it, whatever the clock's own instants are (a test's manual clock, or the
/// continuous clock).
private struct Timeline: Sendable {
    /// The time since the book was made.
    let now: @Sendable () -> Duration
    /// Sleeps until that time is `deadline`.
    let sleep: @Sendable (_ until: Duration) async throws -> Void

    init<C: Clock<Duration>>(_ clock: C) {
        let start = clock.now
        now = { start.duration(to: clock.now) }
        sleep = { deadline in try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil) }
    }

    func sleep(until deadline: Duration) async throws {
        try await sleep(deadline)
    }
}
