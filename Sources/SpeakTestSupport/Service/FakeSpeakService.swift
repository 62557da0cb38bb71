import Foundation
import SpeakAPI
import SpeakSchedules
import SpeakService
import SpeechModel
import SpeechRendering
import Synchronization

/// A `SpeakService` for testing a front alone, the way HummingbirdTesting tests a router: it
/// records every call a front makes, answers from what the test set, and refuses the calls the
/// test names with the error given. Bodies are decoded with the real limits, so a front's own
/// decoding is tested as it runs.
///
/// No queue, engine or database is behind it: an accepted announcement is only recorded (its
/// status is `queued` from then on), and its `finished` is a completed one at once. Schedules are
/// kept in memory: a body is read by the schedules' own strict decoder, and an unknown id is 404.
public final class FakeSpeakService: SpeakService {
    /// One call a front made: the requirement's name (`accept`, `cancel`, `putSession`, …) and
    /// what it was asked, in a line.
    public struct Call: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public let detail: String
        public var description: String { detail.isEmpty ? name : "\(name) \(detail)" }
    }

    private struct State {
        var calls: [Call] = []
        var refusals: [String: SpeakError] = [:]
        var counted: [SpeakError] = []
        var accepted = 0
        /// The text of each announcement accepted, by id.
        var announcements: [String: String] = [:]
        /// The state `status` shows, by id, where the test set one.
        var states: [String: AnnouncementState] = [:]
        /// The schedules created, oldest first.
        var schedules: [ScheduleResource] = []
    }

    private let state = Mutex(State())
    public let limits: ServiceLimits
    /// What `health()` answers.
    public let report: HealthReport
    /// What `voices()` answers.
    public let voiceList: [VoiceInfo]

    /// - Parameters:
    ///   - limits: the limits bodies are decoded with.
    ///   - voices: what `voices()` answers.
    public init(limits: ServiceLimits = ServiceLimits(), voices: [VoiceInfo] = []) {
        self.limits = limits
        self.voiceList = voices
        self.report = HealthReport(
            engine: HealthReport.Engine(state: .ok, name: "fake"), audio: HealthReport.Audio(state: .ok, sink: "fake"),
            queue: HealthReport.Queue(waiting: 0, speaking: false, capacity: 32))
    }

    /// Has every later call named `name` refused with `error`.
    public func refuse(_ name: String, with error: SpeakError) {
        state.withLock { $0.refusals[name] = error }
    }

    /// Has `status` show announcement `id` (one accepted here) in `state` from now on.
    public func setState(_ state: AnnouncementState, of id: String) {
        self.state.withLock { $0.states[id] = state }
    }

    /// The calls made so far, in order.
    public var calls: [Call] { state.withLock { $0.calls } }

    /// The refusals a front counted itself (`countRefusal`).
    public var countedRefusals: [SpeakError] { state.withLock { $0.counted } }

    /// Records the call, then throws the refusal the test set for it, if any.
    private func enter(_ name: String, _ detail: String = "") throws(SpeakError) {
        let refusal = state.withLock { state in
            state.calls.append(Call(name: name, detail: detail))
            return state.refusals[name]
        }
        if let refusal { throw refusal }
    }

    private func nextAccepted(_ text: String = "") -> AnnouncementAccepted {
        let id = state.withLock { state in
            state.accepted += 1
            let id = "fake-\(state.accepted)"
            state.announcements[id] = text
            return id
        }
        return AnnouncementAccepted(id: id, state: .queued, position: 0)
    }

    // MARK: SpeakService

    /// Request ids as a service without a state database keeps them: this run's, in memory.
    public let requests: any RequestMemory = FakeRequestMemory()

    public func accept(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> AnnouncementAccepted {
        let request = try limits.decode(body)
        try enter("accept", "\(request.utterance.text) from \(origin.front)")
        return nextAccepted(request.utterance.text)
    }

    public func accept(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try enter("accept", "\(request.utterance.text) from \(origin.front)")
        return nextAccepted(request.utterance.text)
    }

    public func accept(
        recording samples: [Int16], as request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try enter("acceptRecording", "\(samples.count) samples to \(request.output ?? "default") from \(origin.front)")
        return nextAccepted()
    }

    public func finished(id: String) async throws(SpeakError) -> AnnouncementEvent {
        try enter("finished", id)
        return AnnouncementEvent(
            type: .finished, id: id, text: "", priority: .default, timestamp: Date(), success: true, reason: .completed)
    }

    public func render(_ decoded: AnnouncementRequest.Decoded, raw: Bool) async throws(SpeakError) -> SpeechRender {
        try enter("render", decoded.request.utterance.text)
        // 100 ms of silence at 22,050 Hz.
        let audio = AsyncThrowingStream<PCMChunk, any Error> { continuation in
            continuation.yield(PCMChunk(samples: Array(repeating: 0, count: 2_205)))
            continuation.finish()
        }
        return SpeechRender(
            format: engineFormat, textField: decoded.textField, audio: audio)
    }

    public func prerender(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> Prerendered {
        _ = try limits.decode(body)
        try enter("prerender")
        return Prerendered(samples: 0, seconds: 0)
    }

    public func cancel(id: String) async throws(SpeakError) -> Bool {
        try enter("cancel", id)
        return true
    }

    public func cancelAll(output: String?) async throws(SpeakError) -> Int {
        try enter("cancelAll", output ?? "")
        return 0
    }

    public func pause(id: String?, output: String?, atWordEnd: Bool) async throws(SpeakError) -> AnnouncementStatus {
        try enter("pause", id ?? output ?? "")
        return AnnouncementStatus(id: id ?? "", text: "", priority: .default, state: .paused)
    }

    public func resume(id: String?, output: String?) async throws(SpeakError) -> AnnouncementStatus {
        try enter("resume", id ?? output ?? "")
        return AnnouncementStatus(id: id ?? "", text: "", priority: .default, state: .speaking)
    }

    public func repeatAnnouncement(
        id: String, key: String?, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try enter("repeatAnnouncement", id)
        return nextAccepted()
    }

    public func repeatLast(
        output: String?, count: Int, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> [AnnouncementAccepted] {
        try enter("repeatLast", "\(output ?? "default") \(count)")
        return (0..<count).map { _ in nextAccepted() }
    }

    public func putSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange {
        try enter("putSession", request.output ?? "default")
        return SessionChange(change: .started, session: SessionStatus(id: "s1", output: request.output ?? "default"))
    }

    public func sessions() async -> [SessionStatus] {
        try? enter("sessions")
        return []
    }

    public func endSession(output: String?, id: String?) async throws(SpeakError) -> SessionChange {
        try enter("endSession", id ?? output ?? "")
        return SessionChange(
            change: .ended, reason: .ended, session: SessionStatus(id: id ?? "s1", output: output ?? "default"))
    }

    public func endSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange {
        try await endSession(output: request.output, id: request.id)
    }

    /// Records the call with the id the body names (or `new`); keeps the schedule, named
    /// `schedule-N` when the body names none. A body the schedules' decoder refuses is 422 (400
    /// when it is not strict JSON) naming its field, an id in use 409.
    public func createSchedule(_ body: Data) async throws(SpeakError) -> ScheduleResource {
        let decoded = try Self.schedule { () throws(ScheduleError) in try ScheduleDefinition.decode(creating: body) }
        try enter("createSchedule", decoded.id ?? "new")
        return try state.withLock { state throws(SpeakError) in
            let id = decoded.id ?? "schedule-\(state.schedules.count + 1)"
            guard !state.schedules.contains(where: { $0.id == id }) else {
                throw SpeakError(.conflict, name: "scheduleExists", "a schedule with id '\(id)' exists", field: "id")
            }
            let now = Date()
            let resource = ScheduleResource(
                id: id, definition: decoded.definition, created: now, updated: now, lastSlot: nil, next: nil)
            state.schedules.append(resource)
            return resource
        }
    }

    /// Records the call; the fake service plans no slots, so it answers `stateUnavailable`.
    public func previewSchedule(_ body: Data, count: Int) async throws(SpeakError) -> SchedulePreview {
        try enter("previewSchedule")
        throw SpeakError(.stateUnavailable, name: "stateUnavailable", "the fake service keeps no schedules")
    }

    /// Records the call with its cursor and limit; pages the schedules kept by their ids, those
    /// whose id or name holds `matching` (ignoring case; empty or nil matches all) and whose
    /// `paused` is as asked (nil: either).
    public func schedules(after: String?, limit: Int, matching: String?, paused: Bool?) async throws(SpeakError) -> (
        schedules: [ScheduleResource], next: String?
    ) {
        try enter("schedules", "after=\(after ?? "") limit=\(limit)")
        let word = matching ?? ""
        let all = state.withLock { $0.schedules }.filter { resource in
            (paused == nil || resource.definition.paused == paused)
                && (word.isEmpty
                    || [resource.id, resource.definition.name ?? ""].contains {
                        $0.localizedCaseInsensitiveContains(word)
                    })
        }
        let start = after.flatMap { cursor in all.firstIndex { $0.id == cursor }.map { $0 + 1 } } ?? 0
        let page = Array(all.dropFirst(start).prefix(limit))
        return (page, start + page.count < all.count ? page.last?.id : nil)
    }

    public func schedule(id: String) async throws(SpeakError) -> ScheduleResource {
        try enter("schedule", id)
        guard let resource = state.withLock({ $0.schedules.first { $0.id == id } }) else {
            throw Self.unknownSchedule(id)
        }
        return resource
    }

    /// Applies the merge patch with the schedules' own decoder.
    public func updateSchedule(id: String, patch: Data) async throws(SpeakError) -> ScheduleResource {
        try enter("updateSchedule", id)
        guard var resource = state.withLock({ $0.schedules.first { $0.id == id } }) else {
            throw Self.unknownSchedule(id)
        }
        let definition = resource.definition
        resource.definition = try Self.schedule { () throws(ScheduleError) in try definition.merging(patch: patch) }
        resource.updated = Date()
        let updated = resource
        state.withLock { state in
            if let index = state.schedules.firstIndex(where: { $0.id == id }) { state.schedules[index] = updated }
        }
        return updated
    }

    public func deleteSchedule(id: String) async throws(SpeakError) {
        try enter("deleteSchedule", id)
        let removed = state.withLock { state -> Bool in
            guard let index = state.schedules.firstIndex(where: { $0.id == id }) else { return false }
            state.schedules.remove(at: index)
            return true
        }
        if !removed { throw Self.unknownSchedule(id) }
    }

    private static func unknownSchedule(_ id: String) -> SpeakError {
        SpeakError(.notFound, name: "unknownSchedule", "no schedule with id '\(id)'", field: "id")
    }

    /// `decode`'s result, or its refusal as the service words it: 400 for a body that is not
    /// strict JSON, else 422 naming the field.
    private static func schedule<T>(_ decode: () throws(ScheduleError) -> T) throws(SpeakError) -> T {
        do {
            return try decode()
        } catch {
            throw SpeakError(
                error.isMalformed ? .malformed : .invalid, name: "invalidSchedule", error.message, field: error.field)
        }
    }

    /// Records the call with the filters and the page the query asks for, in the order of
    /// ``AuditQuery``'s properties (those given only).
    public func audit(_ query: AuditQuery) async throws(SpeakError) -> AuditPage {
        var asked: [String] = []
        if let since = query.since { asked.append("since=\(since.timeIntervalSince1970)") }
        if let until = query.until { asked.append("until=\(until.timeIntervalSince1970)") }
        for (name, value) in [
            ("output", query.output), ("reason", query.reason), ("front", query.front), ("text", query.text),
        ] {
            if let value { asked.append("\(name)=\(value)") }
        }
        if let after = query.after { asked.append("after=\(after)") }
        asked.append("limit=\(query.limit)")
        try enter("audit", asked.joined(separator: " "))
        return AuditPage(entries: [], next: nil)
    }

    public var lastEventSequence: UInt64 { 0 }

    public func followEvents(after start: UInt64, progress: Bool) -> AsyncStream<EventFeed> {
        AsyncStream { $0.finish() }
    }

    public func events(after start: UInt64?, progress: Bool) -> AsyncStream<SequencedAnnouncementEvent> {
        AsyncStream { $0.finish() }
    }

    /// An announcement accepted here is `queued`, or in the state the test set
    /// (``setState(_:of:)``); any other id is unknown (nil).
    public func status(id: String, key: String?) async -> AnnouncementStatus? {
        try? enter("status", id)
        let known = state.withLock { state in
            state.announcements[id].map { (text: $0, state: state.states[id] ?? .queued) }
        }
        guard let known else { return nil }
        return AnnouncementStatus(id: id, text: known.text, priority: .default, state: known.state)
    }

    public func snapshot() async -> [AnnouncementStatus] {
        try? enter("snapshot")
        return []
    }

    public func health() async -> HealthReport { report }

    public func sessionDescription(output name: String) async throws(SpeakError) -> String {
        try enter("sessionDescription", name)
        throw SpeakError(
            .notFound, name: ErrorResponse.Code.unknownOutput, "no output is called '\(name)'", field: "name")
    }

    public func checkOutput(_ name: String) throws(SpeakError) {
        try enter("checkOutput", name)
    }

    public func voices() async throws(SpeakError) -> [VoiceInfo] {
        try enter("voices")
        return voiceList
    }

    public var engines: [EngineIdentity] { [EngineIdentity(name: "fake", version: "1")] }

    public var engineFormat: AudioFormat { AudioFormat(sampleRate: 22_050) }

    public func clips() async throws(SpeakError) -> [ClipInfo] {
        try enter("clips")
        return []
    }

    /// Records the call with the name, the body's size and `replace`; the clip it answers is one
    /// second of mono 22.05 kHz.
    public func putClip(name: String, audio: Data, replace: Bool) async throws(SpeakError) -> ClipStored {
        try enter("putClip", "\(name) \(audio.count) bytes\(replace ? " replace" : "")")
        return ClipStored(
            clip: ClipInfo(name: name, file: "\(name).wav", duration: 1, sampleRate: 22_050, channels: 1),
            replaced: replace)
    }

    /// Records the call; the sound is a tenth of a second of silence in ``engineFormat``.
    public func clipSound(name: String) async throws(SpeakError) -> [Int16] {
        try enter("clipSound", name)
        return [Int16](repeating: 0, count: 2_205)
    }

    public func countRefusal(_ error: SpeakError, origin: AnnouncementOrigin, output: String?) {
        state.withLock { $0.counted.append(error) }
    }
}

/// Request ids kept in memory for this run, as a service without a state database keeps them.
final class FakeRequestMemory: RequestMemory {
    private let seen = Mutex(Set<String>())

    func claim(_ requestId: String, at time: Date) async throws(SpeakError) -> SeenRequest? {
        seen.withLock { $0.insert(requestId).inserted } ? nil : SeenRequest(thisRun: true)
    }

    func accepted(_ requestId: String, announcement: String) async throws(SpeakError) {}

    func outcome(_ requestId: String, report: Data) async throws(SpeakError) {}

    func forget(_ requestId: String) async throws(SpeakError) {
        _ = seen.withLock { $0.remove(requestId) }
    }
}

extension SpeakError.Code {
    /// Every code, for a front's test that maps each one to its protocol.
    public static let everyCode: [SpeakError.Code] = [
        .malformed, .tooLarge, .invalid, .notFound, .conflict, .queueFull, .audioUnavailable, .shuttingDown,
        .stateUnavailable, .engineUnavailable, .forbidden,
    ]
}
