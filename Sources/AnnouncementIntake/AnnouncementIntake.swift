import AnnouncementQueue
import FoundationEssentials
import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering

/// The one way an announcement enters speakd, below every front (HTTP, MQTT): the strict decode,
/// the limits, the chime check, the session of the output it addresses (`sessions`), the output's
/// queue, `prepare`, the health gate and `submit`; and repeats of what an output said.
///
/// A front hands it a body (or a request it decoded with the same `AnnouncementRequest.decode`)
/// and gets an accepted announcement or an `SpeakError`, which it answers in its own protocol;
/// so the same bad input is refused the same way whatever carried it, and counted once.
public struct AnnouncementIntake: Sendable {
    /// The queue of every named output.
    public let outputs: AnnouncementOutputs
    /// The engine that prepares (validates and compiles) each utterance.
    public let renderer: any SpeechRenderer
    /// Engine and audio state: an output whose sink is down takes no new announcement.
    public let health: any HealthReporting
    /// What it admits: the body size, the text and span limits, the chimes a request may name.
    public let limits: ServiceLimits
    /// The outputs configured private (`--output NAME=SPEC,private`): the only ones a private
    /// announcement is spoken on.
    public var privateOutputs: Set<String> = []
    /// The outputs' sessions and what they remember for repeats.
    public let sessions: SessionBook
    private let counters: ServiceCounters
    /// Records each refusal with its origin (the audit log), or nil.
    public var refusals: (any RefusalRecorder)?
    /// The keys and texts of private announcements.
    let privateTexts: PrivateTexts

    /// - Parameters:
    ///   - outputs: the queue of every named output.
    ///   - renderer: the engine, which prepares each utterance.
    ///   - health: engine and audio state, for the gate before `submit`.
    ///   - limits: what it admits: the body size, the text and span limits, the chimes.
    ///   - counters: what the intake counts for `/metrics`.
    ///   - sessions: the outputs' sessions; nil makes a book on `outputs` with the continuous clock.
    public init(
        outputs: AnnouncementOutputs, renderer: any SpeechRenderer, health: any HealthReporting,
        limits: ServiceLimits = ServiceLimits(), counters: ServiceCounters = .none, sessions: SessionBook? = nil
    ) {
        self.sessions = sessions ?? SessionBook(outputs: outputs)
        self.privateTexts = PrivateTexts(capacity: outputs.queues.count * (AnnouncementQueue.defaultCapacity + 1_024))
        self.outputs = outputs
        self.renderer = renderer
        self.health = health
        self.limits = limits
        self.counters = counters
    }

    /// Decodes, checks, prepares and queues one request body, as the session of the output it
    /// addresses wants it heard.
    ///
    /// - Parameters:
    ///   - body: the request body, as `POST /v1/announcements` takes it.
    ///   - origin: the front and who sent it there; the announcement's events carry it.
    ///   - adjust: a front's own change to the decoded request before it is checked further
    ///     (MQTT's message expiry shortens `expiresAfter`); it may refuse the request by throwing.
    /// - Returns: the request as accepted, and the queue's answer.
    public func accept(
        _ body: Data, origin: AnnouncementOrigin = .local,
        adjust: (inout AnnouncementRequest) async throws(SpeakError) -> Void = { _ throws(SpeakError) in }
    ) async throws(SpeakError) -> (request: AnnouncementRequest, accepted: AnnouncementAccepted) {
        var output: String?
        return try await countingRefusal(origin: origin, output: { output }) { () async throws(SpeakError) in
            var request = try decode(body)
            output = request.output
            try await adjust(&request)
            return try await submitPersonalized(request, origin: origin)
        }
    }

    /// Checks a request a front built itself (SSIP), within the limits, and queues it as
    /// `accept(_:adjust:)` queues a decoded one: no front encodes a request for the
    /// intake to decode again.
    /// - Throws: `SpeakError` naming the field, counted as a refusal.
    public func accept(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin = .local
    ) async throws(SpeakError) -> (request: AnnouncementRequest, accepted: AnnouncementAccepted) {
        try await countingRefusal(origin: origin, output: { request.output }) { () async throws(SpeakError) in
            do throws(SpeechInputError) {
                try request.utterance.validate(limits: limits.utterance)
            } catch {
                throw SpeakError.invalid(error)
            }
            return try await submitPersonalized(request, origin: origin)
        }
    }

    /// `body`'s result, its refusal counted for `/metrics` and recorded.
    private func countingRefusal<Result>(
        origin: AnnouncementOrigin, output: () -> String?, _ body: () async throws(SpeakError) -> Result
    ) async throws(SpeakError) -> Result {
        do {
            return try await body()
        } catch {
            countRefusal(error, origin: origin, output: output())
            throw error
        }
    }

    /// Applies the session of the output `request` addresses, prepares and queues it, and has it
    /// remembered for repeats once heard: `accept` after the decode, for a front that decodes
    /// itself (MQTT). Refusals are not counted here.
    /// - Returns: the request as the session changed it, and the queue's answer.
    public func submitPersonalized(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin = .local
    ) async throws(SpeakError) -> (request: AnnouncementRequest, accepted: AnnouncementAccepted) {
        let (original, personalized, prepared) = try await personalizeAndPrepare(request, origin: origin)
        return (personalized, try await submitRemembered(prepared, original: original))
    }

    /// Addresses `request` (a private one that names no output to the private output, whose
    /// session is then the one that applies), applies that output's session and prepares it.
    /// - Returns: the request as addressed, before the session changed it; the session's version
    ///   of it; and the announcement prepared from that.
    private func personalizeAndPrepare(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> (
        original: AnnouncementRequest, personalized: AnnouncementRequest, prepared: PreparedAnnouncement
    ) {
        var request = request
        if request.delivery.isPrivate, request.output == nil, request.outputs == nil {
            request.output = try queue(for: request).output
        }
        // A session is one listener's at one output: an announcement to several zones is heard
        // by the hall, and no session changes it.
        let personalized = try zones(for: request) == nil ? await sessions.personalize(request) : request
        var prepared = try await prepare(personalized)
        prepared.origin = origin
        return (request, personalized, prepared)
    }

    /// Submits `prepared` and has it remembered for repeats, as `original`, once heard.
    private func submitRemembered(
        _ prepared: PreparedAnnouncement, original: AnnouncementRequest
    ) async throws(SpeakError) -> AnnouncementAccepted {
        let accepted = try await submit(prepared)
        // One dropped at once (`dropIfBusy` on a busy queue) is never heard, so never remembered:
        // no task waits for its end.
        if accepted.state != .finished {
            await sessions.accepted(id: accepted.id, original: original, output: try queue(for: prepared).output)
        }
        return accepted
    }

    /// Decodes, checks, personalizes and prepares a body now, to be submitted later with
    /// `submit(ahead:original:)`: a schedule's announcement, rendered before its slot in between.
    /// A refusal here is not counted or recorded: the caller tries `accept` at the slot instead,
    /// which does both.
    /// - Returns: the request before its output's session changed it, and the announcement prepared.
    public func prepare(
        ahead body: Data, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> (request: AnnouncementRequest, prepared: PreparedAnnouncement) {
        let (original, _, prepared) = try await personalizeAndPrepare(try decode(body), origin: origin)
        return (original, prepared)
    }

    /// Decodes, checks and prepares a body as its output's session would have it spoken, for
    /// `POST /v1/prerender`: the render cache keeps its audio once rendered. Counted and
    /// recorded as a refusal when refused; a private announcement is refused (`private`), since
    /// its audio would be kept.
    /// - Returns: the speech to render.
    public func prepare(
        prerender body: Data, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> PreparedUtterance {
        var output: String?
        return try await countingRefusal(origin: origin, output: { output }) { () async throws(SpeakError) in
            let request = try decode(body)
            output = request.output
            guard !request.delivery.isPrivate else {
                throw .invalidValue(
                    field: "private", "a private announcement is never rendered ahead: its audio would be kept")
            }
            return try await personalizeAndPrepare(request, origin: origin).prepared.speech
        }
    }

    /// Submits what `prepare(ahead:origin:)` made, and has it remembered for repeats once heard.
    /// - Parameter original: the request before its session changed it.
    public func submit(
        ahead prepared: PreparedAnnouncement, original: AnnouncementRequest
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try await countingRefusal(origin: prepared.origin ?? .local, output: { original.output }) {
            () async throws(SpeakError) in
            try await submitRemembered(prepared, original: original)
        }
    }

    /// Counts and records a refusal that a front met outside `accept` (one step at a time, as
    /// MQTT does).
    public func countRefusal(_ error: SpeakError, origin: AnnouncementOrigin = .local, output: String? = nil) {
        counters.refused(error.refusalReason)
        refusals?.refused(error, origin: origin, output: output)
    }

    /// Decodes a request body strictly, within the limits.
    public func decode(_ body: Data) throws(SpeakError) -> AnnouncementRequest {
        try limits.decode(body)
    }

    /// Checks what the request names (its output and chimes), validates and compiles its
    /// utterance once, and checks the values the queue interprets: the one validation of an
    /// announcement, whose result travels with it to the queue and the worker.
    public func prepare(_ request: AnnouncementRequest) async throws(SpeakError) -> PreparedAnnouncement {
        let zones = try zones(for: request)
        let output: String
        if let first = zones?.first {
            output = first
        } else {
            output = try queue(for: request).output
        }
        try checkChimes(of: request)
        var speech = try await prepare(request.utterance)
        speech.isPrivate = request.delivery.isPrivate
        var prepared: PreparedAnnouncement
        do {
            prepared = try PreparedAnnouncement(request, speech: speech)
        } catch {
            throw .invalid(error)
        }
        // The output whose queue takes it, as the rules for private announcements chose it.
        prepared.output = output
        prepared.zones = zones
        if zones != nil {
            // Rendered once for every zone: each plays these same samples.
            var chunks: [PCMChunk] = []
            do {
                for try await chunk in renderer.render(speech) { chunks.append(chunk) }
            } catch let error as SpeechInputError {
                throw .invalid(error)
            } catch {
                throw SpeakError(.invalid, name: "renderFailed", "the announcement could not be rendered: \(error)")
            }
            prepared.prerendered = chunks
        }
        return prepared
    }

    /// The outputs of an announcement heard in several zones: `output` as a list, or naming a
    /// zone group; nil for one output. A private one only when every zone is a private output
    /// (several headsets at one counter): it is never spoken aloud in one of them.
    func zones(for request: AnnouncementRequest) throws(SpeakError) -> [String]? {
        let names: [String]
        if let list = request.outputs {
            names = list
        } else if let name = request.output, outputs.zoneGroups[name] != nil {
            names = [name]
        } else {
            return nil
        }
        let zones: [String]
        do {
            zones = try outputs.zones(named: names, list: request.outputs != nil)
        } catch {
            throw .scheduling(error)
        }
        if request.delivery.isPrivate, let open = zones.first(where: { !privateOutputs.contains($0) }) {
            throw .invalidValue(
                field: "output",
                "zone '\(open)' is not a private output, and a private announcement is spoken only on private outputs "
                    + "(\(privateList))")
        }
        return zones
    }

    /// The queue that speaks `request`: the output it names, else `default`; a private one only
    /// on a private output, which it may leave unnamed when exactly one is configured
    /// (docs/privacy.md). A private announcement is refused rather than spoken aloud.
    public func queue(for request: AnnouncementRequest) throws(SpeakError) -> AnnouncementQueue {
        guard request.delivery.isPrivate else {
            return try queue(named: request.output ?? AnnouncementOutputs.defaultName)
        }
        if let name = request.output {
            let queue = try queue(named: name)
            guard privateOutputs.contains(name) else {
                throw .invalidValue(
                    field: "output",
                    "output '\(name)' is not private, and a private announcement is spoken only on a private output "
                        + "(\(privateList))")
            }
            return queue
        }
        guard privateOutputs.count == 1, let only = privateOutputs.first else {
            if privateOutputs.isEmpty {
                throw .invalidValue(
                    field: "private",
                    "no output is private (--output NAME=SPEC,private), and a private announcement is never spoken aloud"
                )
            }
            throw .invalidValue(field: "output", "several outputs are private (\(privateList)); name one in output")
        }
        return try queue(named: only)
    }

    /// The queue of the output `prepared` names (`prepare` chose it).
    private func queue(for prepared: PreparedAnnouncement) throws(SpeakError) -> AnnouncementQueue {
        try queue(named: prepared.output ?? AnnouncementOutputs.defaultName)
    }

    private func queue(named name: String) throws(SpeakError) -> AnnouncementQueue {
        do {
            return try outputs.queue(requiring: name)
        } catch {
            throw .scheduling(error)
        }
    }

    private var privateList: String {
        privateOutputs.isEmpty ? "none is configured" : privateOutputs.sorted().joined(separator: ", ")
    }

    /// Validates and compiles `utterance` alone (`POST /v1/speech`).
    public func prepare(_ utterance: Utterance) async throws(SpeakError) -> PreparedUtterance {
        do {
            return try await renderer.prepare(utterance)
        } catch {
            // Named as the client wrote it: a sequence's part, not the joined whole's span.
            throw .invalid(utterance.namingInWire(error))
        }
    }

    /// Checks that the chimes `request` names (`chime`, `chimeAfter`) are configured.
    func checkChimes(of request: AnnouncementRequest) throws(SpeakError) {
        for (field, choice) in [("chime", request.delivery.chime), ("chimeAfter", request.delivery.chimeAfter)] {
            if case .named(let name) = choice, !limits.chimes.contains(name) {
                let known = limits.chimes.isEmpty ? "none are configured" : limits.chimes.joined(separator: ", ")
                throw .notFound(field: field, "no chime named '\(name)' (\(known))")
            }
        }
    }

    /// Hands a prepared announcement to the queue of the output it names, unless that output's
    /// audio is down (unavailable; a degraded one takes it); counts it when accepted.
    public func submit(_ prepared: PreparedAnnouncement) async throws(SpeakError) -> AnnouncementAccepted {
        if let zones = prepared.zones {
            let health = await health.health()
            let down = { @Sendable (zone: String) -> String? in
                let audio = Self.audio(of: zone, in: health)
                return audio.state != .unavailable ? nil : audio.detail ?? "its audio is down"
            }
            // A zone whose audio is down fails there; when every one is, nothing is accepted.
            if zones.allSatisfy({ down($0) != nil }), let first = zones.first {
                throw .audioUnavailable(down(first))
            }
            return try await accept(prepared) { () async throws(AnnouncementQueueError) in
                try await outputs.submit(prepared, zones: zones) { down($0) }
            }
        }
        let queue = try queue(for: prepared)
        let health = await health.health()
        let audio = Self.audio(of: queue.output, in: health)
        // A degraded output (an RTP output whose last send failed) takes the next one: it tries again.
        guard audio.state != .unavailable else {
            throw .audioUnavailable(audio.detail)
        }
        return try await accept(prepared) { () async throws(AnnouncementQueueError) in
            try await queue.submit(prepared)
        }
    }

    /// The state of `output`'s audio in `health`, and why: its own entry, else the default audio's.
    private static func audio(of output: String, in health: HealthReport) -> (
        state: HealthReport.State, detail: String?
    ) {
        health.outputs?.first { $0.name == output }.map { ($0.state, $0.detail) }
            ?? (health.audio.state, health.audio.detail)
    }

    /// What `submit` answers when `enqueue` takes `prepared`: a private announcement's key added,
    /// the acceptance counted.
    private func accept(
        _ prepared: PreparedAnnouncement,
        by enqueue: () async throws(AnnouncementQueueError) -> AnnouncementAccepted
    ) async throws(SpeakError) -> AnnouncementAccepted {
        var accepted: AnnouncementAccepted
        do {
            accepted = try await enqueue()
        } catch {
            throw .scheduling(error)
        }
        // Its poster's capability: the key shows the text, which nothing else does.
        if prepared.delivery.isPrivate {
            accepted.key = privateTexts.key(for: accepted.id, text: prepared.speech.utterance.text)
        }
        counters.accepted(prepared.delivery.priority)
        return accepted
    }
}
