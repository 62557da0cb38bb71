import AnnouncementIntake
import AnnouncementRecords
import FoundationEssentials
import SpeakAPI
import SpeakScheduler
import SpeakSchedules
import SpeakService
import SpeakState
import SpeechModel
import SpeechRendering

/// An announcement rendered as it would be played: its chime, its speech at the announcements'
/// loudness, its chime after, each repeat after its gap.
public typealias HallSound =
    @Sendable (AnnouncementRequest, PreparedUtterance) -> AsyncThrowingStream<PCMChunk, any Error>

/// speakd's service: the intake (the outputs' queues, sessions, the engines), the schedules and
/// the audit log behind the one protocol every front calls. The daemon builds it; no front sees
/// what it is made of.
public struct CoreService: SpeakService {
    /// The way in to the queues, with the engine and the sessions.
    public let intake: AnnouncementIntake
    /// Engine, audio, state and fleet health, as `/healthz` reports it before the queues' occupancy.
    public var healthReporter: any HealthReporting
    /// The schedules, when the daemon keeps state (`--state-dir`).
    public var scheduleService: ScheduleService?
    /// The audit log, when the daemon keeps state.
    public var auditLog: AuditLog?
    /// The clips of the library as they are now, when the daemon has one (`--clips`).
    public var clipLibrary: (@Sendable () async throws -> [ClipInfo])?
    /// Stores an upload as a clip (name, file, replace), checked as a file of the library is;
    /// nil when the daemon does not allow uploads (`--clips-upload`). Its refusals are the
    /// service's, made by the daemon from the library's.
    public var clipUpload: (@Sendable (String, Data, Bool) async throws -> ClipStored)?
    /// The sound of a clip as recorded, in the engine's format; nil for no such clip, or no library.
    public var clipSound: (@Sendable (String, AudioFormat) async throws -> [Int16]?)?
    /// What a render that is not raw sounds like; nil renders the engine's own audio.
    public var hallSound: HallSound?
    /// Each RTP output's session description by output name, as the daemon's sinks make it; nil
    /// for an output that plays to a local sink, or that does not exist.
    public var sessionDescriptions: @Sendable (String) -> String? = { _ in nil }
    /// The request ids a redelivering front (the fleet's) has seen: this run's, and the ones kept
    /// across restarts when the daemon keeps state.
    public var requests: any RequestMemory = RequestStore(table: nil)

    /// The bounds on renders without queueing.
    public let renderLimits: RenderLimits
    /// The renders that hold audio now, and those waiting for a slot.
    let renderSlots: RenderSlots

    /// - Parameters:
    ///   - intake: the way in, with the outputs' queues and the engine.
    ///   - health: the state `/healthz` reports (it may know more than the intake's gate needs,
    ///     such as the fleet link).
    ///   - renderLimits: the bounds on renders without queueing, whichever front asks.
    public init(
        intake: AnnouncementIntake, health: (any HealthReporting)? = nil, renderLimits: RenderLimits = RenderLimits()
    ) {
        self.intake = intake
        self.healthReporter = health ?? intake.health
        self.renderLimits = renderLimits
        self.renderSlots = RenderSlots(count: renderLimits.maxConcurrent, maxWaiting: renderLimits.maxWaiting)
    }

    public var limits: ServiceLimits { intake.limits }

    // MARK: Announce

    public func accept(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> AnnouncementAccepted {
        try await intake.accept(body, origin: origin).accepted
    }

    public func accept(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try await intake.accept(request, origin: origin).accepted
    }

    public func accept(
        recording samples: [Int16], as request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        let body: Data
        do {
            body = try WireFormat.encoder().encode(request)
        } catch {
            throw SpeakError(.invalid, name: "invalidValue", "the request cannot be encoded: \(error)")
        }
        var (original, prepared) = try await intake.prepare(ahead: body, origin: origin)
        // The announcement plays what was sent instead of rendering its text.
        prepared.prerendered = [PCMChunk(samples: samples)]
        return try await intake.submit(ahead: prepared, original: original)
    }

    public func finished(id: String) async throws(SpeakError) -> AnnouncementEvent {
        try await intake.finished(id: id)
    }

    // MARK: Render only

    public func render(_ decoded: AnnouncementRequest.Decoded, raw: Bool) async throws(SpeakError) -> SpeechRender {
        try Self.requireHonoured(decoded, raw: raw)
        // The output and chimes it names are checked as for an announcement.
        let speech = try await intake.prepare(decoded.request).speech
        let hold: RenderHold
        do {
            hold = try await renderSlots.acquire()
        } catch let error as SpeakError {
            throw error
        } catch {
            throw SpeakError(
                .shuttingDown, name: ErrorResponse.Code.shuttingDown,
                "the render was cancelled while it waited for a slot")
        }
        let renderer = intake.renderer
        let audio =
            raw
            ? renderer.render(speech, chunking: .whole)
            : hallSound?(decoded.request, speech) ?? renderer.render(speech, chunking: .whole)
        return SpeechRender(
            format: renderer.format, textField: decoded.textField,
            audio: Self.bounded(audio, format: renderer.format, limits: renderLimits, field: decoded.textField),
            hold: hold)
    }

    /// `audio`, ending with `SpeakError` `tooLarge` naming `field` once it passes the longest
    /// render; the engine stops with it.
    static func bounded(
        _ audio: AsyncThrowingStream<PCMChunk, any Error>, format: AudioFormat, limits: RenderLimits, field: String
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        let tooLarge = SpeakError(
            .tooLarge, name: ErrorResponse.Code.tooLarge,
            "the speech is longer than the limit of \(limits.maxSeconds) seconds of audio a render may hold; "
                + "split it into shorter requests",
            field: field)
        return AsyncThrowingStream(
            pulling: Bounded(
                base: audio.makeAsyncIterator(), maxSamples: limits.maxSeconds * format.sampleRate * format.channels,
                tooLarge: tooLarge))
    }

    /// Chunks of `base` until their samples pass `maxSamples`, then `tooLarge`.
    private struct Bounded: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<PCMChunk, any Error>.Iterator
        let maxSamples: Int
        let tooLarge: SpeakError
        var samples = 0

        mutating func next() async throws -> PCMChunk? {
            guard let chunk = try await base.next() else { return nil }
            samples += chunk.samples.count
            guard samples <= maxSamples else { throw tooLarge }
            return chunk
        }
    }

    /// The request keys a render does not honour, refused by name rather than dropped: the
    /// queue's (`expiresAfter`, `requestId`, and `queue: false`, an interruption) always, and with
    /// `raw` the sound's too (`chime`, `chimeAfter`, `repeat`, `output`, and `priority`, which
    /// picks the default chimes). `queue: true`, the default, asks for nothing a render leaves
    /// out: Swift clients send it with every request.
    static func requireHonoured(_ decoded: AnnouncementRequest.Decoded, raw: Bool) throws(SpeakError) {
        let queueOnly: Set = ["queue", "expiresAfter", "requestId"]
        let soundOnly: Set = ["chime", "chimeAfter", "repeat", "output", "priority"]
        for key in decoded.keys where queueOnly.contains(key) || (raw && soundOnly.contains(key)) {
            if key == "queue", decoded.request.delivery.queue { continue }
            let why =
                queueOnly.contains(key)
                ? "POST /v1/speech renders without queueing, so '\(key)' does not apply; leave it out"
                : "a raw render (?raw=true) is the engine's own audio, so '\(key)' does not apply; leave it out"
            throw .invalid(.unsupported(field: key, why))
        }
    }

    public func prerender(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> Prerendered {
        let speech = try await intake.prepare(prerender: body, origin: origin)
        var samples = 0
        do {
            for try await chunk in intake.renderer.render(speech) { samples += chunk.samples.count }
        } catch let error as SpeechInputError {
            throw .invalid(error)
        } catch {
            throw SpeakError(.invalid, name: ErrorResponse.Code.internalError, "the render failed: \(error)")
        }
        let rate = intake.renderer.format.sampleRate
        return Prerendered(samples: samples, seconds: Double(samples) / Double(rate))
    }

    // MARK: Control

    public func cancel(id: String) async throws(SpeakError) -> Bool { try await intake.cancel(id: id) }

    public func cancelAll(output: String?) async throws(SpeakError) -> Int {
        try await intake.cancelAll(output: output)
    }

    public func pause(id: String?, output: String?, atWordEnd: Bool) async throws(SpeakError) -> AnnouncementStatus {
        try await intake.pause(id: id, output: output, atWordEnd: atWordEnd)
    }

    public func resume(id: String?, output: String?) async throws(SpeakError) -> AnnouncementStatus {
        try await intake.resume(id: id, output: output)
    }

    public func repeatAnnouncement(
        id: String, key: String?, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try await intake.repeatAnnouncement(id: id, key: key, origin: origin)
    }

    public func repeatLast(
        output: String?, count: Int, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> [AnnouncementAccepted] {
        try await intake.repeatLast(output: output, count: count, origin: origin)
    }

    // MARK: Sessions

    public func putSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange {
        try await intake.putSession(request)
    }

    public func sessions() async -> [SessionStatus] { await intake.sessions.list() }

    public func endSession(output: String?, id: String?) async throws(SpeakError) -> SessionChange {
        try await intake.sessions.end(output: output, id: id)
    }

    public func endSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange {
        try await intake.sessions.end(endOnly: request)
    }

    // MARK: Schedules

    /// The schedules, or 503 `stateUnavailable` when the daemon keeps no state.
    private func requireSchedules() throws(SpeakError) -> ScheduleService {
        guard let scheduleService else { throw Self.noState }
        return scheduleService
    }

    /// The refusal of a schedule or audit request when speakd keeps no state.
    static let noState = SpeakError(
        .stateUnavailable, name: "stateUnavailable",
        "speakd keeps no state: start it with --state-dir DIR (the system and user units do)")

    public func createSchedule(_ body: Data) async throws(SpeakError) -> ScheduleResource {
        try await requireSchedules().create(body)
    }

    public func previewSchedule(_ body: Data, count: Int) async throws(SpeakError) -> SchedulePreview {
        try await requireSchedules().preview(body, count: count)
    }

    public func schedules(after: String?, limit: Int, matching: String?, paused: Bool?) async throws(SpeakError) -> (
        schedules: [ScheduleResource], next: String?
    ) {
        try await requireSchedules().list(after: after, limit: limit, matching: matching, paused: paused)
    }

    public func schedule(id: String) async throws(SpeakError) -> ScheduleResource {
        try await requireSchedules().schedule(id: id)
    }

    public func updateSchedule(id: String, patch: Data) async throws(SpeakError) -> ScheduleResource {
        try await requireSchedules().update(id: id, patch: patch)
    }

    public func deleteSchedule(id: String) async throws(SpeakError) {
        try await requireSchedules().delete(id: id)
    }

    // MARK: Audit

    public func audit(_ query: AuditQuery) async throws(SpeakError) -> AuditPage {
        guard let auditLog else { throw Self.noState }
        var filter = AuditFilter()
        filter.since = query.since
        filter.until = query.until
        filter.output = query.output
        filter.reason = query.reason
        filter.front = query.front
        filter.text = query.text
        let page: (entries: [AuditEntry], next: Int64?)
        do {
            page = try await auditLog.entries(filter, after: query.after, limit: query.limit)
        } catch {
            throw SpeakError(state: error)
        }
        return AuditPage(entries: page.entries.map(Self.record), next: page.next.map(String.init))
    }

    /// A row of the log as the API shows it.
    static func record(_ entry: AuditEntry) -> AuditRecord {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var record = AuditRecord(id: entry.id, front: entry.front, origin: entry.origin, repeats: entry.repeats)
        record.output = entry.output
        record.priority = entry.priority.flatMap(AnnouncementPriority.init(rawValue:))
        record.queued = entry.queued?.formatted(style)
        record.started = entry.started?.formatted(style)
        record.finished = entry.finished?.formatted(style)
        record.reason = entry.reason
        record.detail = entry.detail
        record.error = entry.error
        record.schedule = entry.schedule
        record.text = entry.text
        record.private = entry.isPrivate ? true : nil
        return record
    }

    // MARK: Events

    public var lastEventSequence: UInt64 { intake.lastEventSequence }

    public func followEvents(after start: UInt64, progress: Bool) -> AsyncStream<EventFeed> {
        intake.followEvents(after: start, progress: progress)
    }

    public func events(after start: UInt64?, progress: Bool) -> AsyncStream<SequencedAnnouncementEvent> {
        intake.events(after: start, progress: progress)
    }

    // MARK: Status

    public func status(id: String, key: String?) async -> AnnouncementStatus? {
        await intake.status(id: id, key: key)
    }

    public func snapshot() async -> [AnnouncementStatus] { await intake.snapshot() }

    public func health() async -> HealthReport {
        var report = await healthReporter.health()
        report.queue = await intake.occupancy()
        if var outputs = report.outputs {
            for index in outputs.indices {
                outputs[index].queue = await intake.occupancy(of: outputs[index].name)
            }
            report.outputs = outputs
        }
        return report
    }

    public func checkOutput(_ name: String) throws(SpeakError) { try intake.checkOutput(name) }

    public func sessionDescription(output name: String) async throws(SpeakError) -> String {
        do throws(SpeakError) {
            try intake.checkOutput(name)
        } catch {
            throw SpeakError(
                .notFound, name: ErrorResponse.Code.unknownOutput, "no output is called '\(name)'", field: "name")
        }
        guard let sdp = sessionDescriptions(name) else {
            throw SpeakError(
                .conflict, name: ErrorResponse.Code.notRTP,
                "output '\(name)' plays to a local sink, not an RTP stream; it has no session description",
                field: "name")
        }
        return sdp
    }

    public func voices() async throws(SpeakError) -> [VoiceInfo] {
        do {
            return try await intake.renderer.voices()
        } catch {
            throw SpeakError(
                .engineUnavailable, name: "engineUnavailable", "the engine cannot list its voices: \(error)")
        }
    }

    public var engines: [EngineIdentity] { intake.renderer.engineIdentities }

    public var engineFormat: AudioFormat { intake.renderer.format }

    public func clips() async throws(SpeakError) -> [ClipInfo] {
        do {
            return try await clipLibrary?() ?? []
        } catch {
            throw SpeakError(.stateUnavailable, name: "clipsUnavailable", "\(error)")
        }
    }

    public func putClip(name: String, audio: Data, replace: Bool) async throws(SpeakError) -> ClipStored {
        guard let clipUpload else {
            throw SpeakError(
                .forbidden, name: ErrorResponse.Code.clipUploadsOff,
                "clip uploads are off: start speakd with --clips DIR and --clips-upload (clips-upload = true in the "
                    + "configuration file) to allow them")
        }
        do {
            return try await clipUpload(name, audio, replace)
        } catch {
            throw Self.clipRefusal(error)
        }
    }

    public func clipSound(name: String) async throws(SpeakError) -> [Int16] {
        let found: [Int16]?
        do {
            found = try await clipSound?(name, engineFormat)
        } catch {
            throw Self.clipRefusal(error)
        }
        guard let sound = found else {
            throw SpeakError(
                .notFound, name: ErrorResponse.Code.unknownClip, "the clip library has no clip '\(name)'",
                field: "name")
        }
        return sound
    }

    /// What the clip closures threw, as the service's refusal: theirs, or 503 `clipsUnavailable`.
    static func clipRefusal(_ error: any Error) -> SpeakError {
        error as? SpeakError ?? SpeakError(.stateUnavailable, name: "clipsUnavailable", "\(error)")
    }

    public func countRefusal(_ error: SpeakError, origin: AnnouncementOrigin, output: String?) {
        intake.countRefusal(error, origin: origin, output: output)
    }
}
