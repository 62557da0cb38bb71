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
/// No queue, engine or database is behind it: an accepted announcement is only recorded, and its
/// `finished` is a completed one at once.
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

    private func nextAccepted() -> AnnouncementAccepted {
        let number = state.withLock { state in
            state.accepted += 1
            return state.accepted
        }
        return AnnouncementAccepted(id: "fake-\(number)", state: .queued, position: 0)
    }

    // MARK: SpeakService

    /// Request ids as a service without a state database keeps them: this run's, in memory.
    public let requests: any RequestMemory = FakeRequestMemory()

    public func accept(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> AnnouncementAccepted {
        let request = try limits.decode(body)
        try enter("accept", "\(request.utterance.text) from \(origin.front)")
        return nextAccepted()
    }

    public func accept(
        _ request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        try enter("accept", "\(request.utterance.text) from \(origin.front)")
        return nextAccepted()
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

    public func createSchedule(_ body: Data) async throws(SpeakError) -> ScheduleResource {
        try enter("createSchedule")
        throw SpeakError(.stateUnavailable, name: "stateUnavailable", "the fake service keeps no schedules")
    }

    public func previewSchedule(_ body: Data, count: Int) async throws(SpeakError) -> SchedulePreview {
        try enter("previewSchedule")
        throw SpeakError(.stateUnavailable, name: "stateUnavailable", "the fake service keeps no schedules")
    }

    public func schedules(after: String?, limit: Int, matching: String?, paused: Bool?) async throws(SpeakError) -> (
        schedules: [ScheduleResource], next: String?
    ) {
        try enter("schedules")
        return ([], nil)
    }

    public func schedule(id: String) async throws(SpeakError) -> ScheduleResource {
        try enter("schedule", id)
        throw SpeakError(.notFound, name: "unknownSchedule", "no schedule with id '\(id)'", field: "id")
    }

    public func updateSchedule(id: String, patch: Data) async throws(SpeakError) -> ScheduleResource {
        try enter("updateSchedule", id)
        throw SpeakError(.notFound, name: "unknownSchedule", "no schedule with id '\(id)'", field: "id")
    }

    public func deleteSchedule(id: String) async throws(SpeakError) {
        try enter("deleteSchedule", id)
    }

    public func audit(_ query: AuditQuery) async throws(SpeakError) -> AuditPage {
        try enter("audit")
        return AuditPage(entries: [], next: nil)
    }

    public var lastEventSequence: UInt64 { 0 }

    public func followEvents(after start: UInt64, progress: Bool) -> AsyncStream<EventFeed> {
        AsyncStream { $0.finish() }
    }

    public func events(after start: UInt64?, progress: Bool) -> AsyncStream<SequencedAnnouncementEvent> {
        AsyncStream { $0.finish() }
    }

    public func status(id: String, key: String?) async -> AnnouncementStatus? {
        try? enter("status", id)
        return nil
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
