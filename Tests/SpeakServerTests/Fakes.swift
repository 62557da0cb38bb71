import Foundation
import SpeakAPI
import SpeakServer
import SpeechModel
import Synchronization

/// A scripted queue for route tests: it accepts up to `capacity` announcements, reports them all
/// as waiting, and finishes them when the test says so. Scheduling itself is tested in the queue's
/// own tests; here only the HTTP mapping is under test.
final class ScriptedScheduler: AnnouncementScheduling {
    private struct State {
        var announcements: [Announcement] = []
        var finished: [String: AnnouncementEvent] = [:]
        var history: [SequencedEvent] = []
        var subscribers: [UUID: AsyncStream<SequencedEvent>.Continuation] = [:]
        var finishWaiters: [String: [CheckedContinuation<AnnouncementEvent, Never>]] = [:]
        var shutDown = false
    }

    let capacity: Int
    /// When set, every submitted announcement finishes at once with this reason.
    let finishImmediately: FinishReason?
    private let state = Mutex(State())

    init(capacity: Int = 4, finishImmediately: FinishReason? = nil) {
        self.capacity = capacity
        self.finishImmediately = finishImmediately
    }

    func submit(_ announcement: Announcement) async throws(SchedulingError) -> AnnouncementAccepted {
        let position = try state.withLock { state throws(SchedulingError) -> Int in
            guard !state.shutDown else { throw .shuttingDown }
            let waiting = state.announcements.filter { state.finished[$0.id] == nil }.count
            guard waiting < capacity else { throw .queueFull(capacity: capacity) }
            state.announcements.append(announcement)
            Self.emit(&state, event(.queued, announcement))
            return waiting + 1
        }
        if let finishImmediately { finish(announcement.id, reason: finishImmediately) }
        return AnnouncementAccepted(id: announcement.id, state: .queued, position: position)
    }

    func cancel(id: String) async throws(SchedulingError) -> Bool {
        let known = state.withLock { state in state.announcements.contains { $0.id == id } }
        guard known else { throw .unknownAnnouncement(id) }
        return finish(id, reason: .cancelled)
    }

    func cancelAll() async -> [String] {
        let ids = state.withLock { state in state.announcements.map(\.id).filter { state.finished[$0] == nil } }
        return ids.filter { finish($0, reason: .cancelled) }
    }

    func snapshot() async -> [AnnouncementStatus] {
        state.withLock { state in
            state.announcements.filter { state.finished[$0.id] == nil }.enumerated().map { index, announcement in
                AnnouncementStatus(
                    id: announcement.id, text: announcement.utterance.text, priority: announcement.priority,
                    state: .queued, position: index + 1)
            }
        }
    }

    func status(id: String) async -> AnnouncementStatus? {
        state.withLock { state in
            guard let announcement = state.announcements.first(where: { $0.id == id }) else { return nil }
            if let finished = state.finished[id] {
                return AnnouncementStatus(
                    id: id, text: announcement.utterance.text, priority: announcement.priority, state: .finished,
                    success: finished.success, reason: finished.reason)
            }
            let waiting = state.announcements.filter { state.finished[$0.id] == nil }
            return AnnouncementStatus(
                id: id, text: announcement.utterance.text, priority: announcement.priority, state: .queued,
                position: (waiting.firstIndex { $0.id == id } ?? 0) + 1)
        }
    }

    func events(after sequence: UInt64?) async -> AsyncStream<SequencedEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SequencedEvent.self)
        let key = UUID()
        state.withLock { state in
            for event in state.history where event.sequence > (sequence ?? 0) {
                continuation.yield(event)
            }
            if state.shutDown {
                continuation.finish()
            } else {
                state.subscribers[key] = continuation
            }
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    func finished(id: String) async throws(SchedulingError) -> AnnouncementEvent {
        let known = state.withLock { state in state.announcements.contains { $0.id == id } }
        guard known else { throw .unknownAnnouncement(id) }
        return await withCheckedContinuation { continuation in
            let done = state.withLock { state -> AnnouncementEvent? in
                if let event = state.finished[id] { return event }
                state.finishWaiters[id, default: []].append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Finishes `id` with `reason`; false when it had finished already.
    @discardableResult
    func finish(_ id: String, reason: FinishReason) -> Bool {
        let (finishedEvent, waiters) = state.withLock { state -> (AnnouncementEvent?, [CheckedContinuation<AnnouncementEvent, Never>]) in
            guard state.finished[id] == nil, let announcement = state.announcements.first(where: { $0.id == id }) else {
                return (nil, [])
            }
            var finished = self.event(.finished, announcement)
            finished.success = reason == .completed
            finished.reason = reason
            state.finished[id] = finished
            Self.emit(&state, finished)
            return (finished, state.finishWaiters.removeValue(forKey: id) ?? [])
        }
        guard let finishedEvent else { return false }
        for waiter in waiters { waiter.resume(returning: finishedEvent) }
        return true
    }

    /// Finishes everything with `shutdown` and ends every event stream.
    func shutdown() {
        let ids = state.withLock { state in state.announcements.map(\.id) }
        for id in ids { finish(id, reason: .shutdown) }
        let subscribers = state.withLock { state in
            state.shutDown = true
            defer { state.subscribers = [:] }
            return state.subscribers.values
        }
        for subscriber in subscribers { subscriber.finish() }
    }

    private static func emit(_ state: inout State, _ event: AnnouncementEvent) {
        let sequenced = SequencedEvent(sequence: UInt64(state.history.count + 1), event: event)
        state.history.append(sequenced)
        for subscriber in state.subscribers.values { subscriber.yield(sequenced) }
    }

    private func event(_ type: AnnouncementEvent.Kind, _ announcement: Announcement) -> AnnouncementEvent {
        AnnouncementEvent(
            type: type, id: announcement.id, text: announcement.utterance.text, priority: announcement.priority,
            timestamp: Date())
    }
}

/// A renderer that yields a fixed tone per span and knows a few languages, so validation failures
/// and WAV framing can be checked without the engine's process-global state.
struct ToneRenderer: SpeechRenderer {
    static let samplesPerSpan = 2_205
    let format = AudioFormat(sampleRate: 22_050)
    let knownLanguages: Set<String> = ["en", "en-GB", "pt-PT"]

    func render(_ utterance: Utterance) -> AsyncThrowingStream<PCMChunk, any Error> {
        AsyncThrowingStream { continuation in
            for _ in utterance.spans {
                let samples = (0..<Self.samplesPerSpan).map { Int16(sin(Double($0) * 0.1) * 8_000) }
                continuation.yield(PCMChunk(samples: samples))
            }
            continuation.finish()
        }
    }

    func validate(_ utterance: Utterance) async throws(SpeechInputError) {
        if let tag = utterance.defaults.language, !knownLanguages.contains(tag.canonical) {
            throw .notFound(field: "language", "no voice speaks '\(tag)'")
        }
        for (index, span) in utterance.spans.enumerated() {
            if let tag = span.attributes.language, !knownLanguages.contains(tag.canonical) {
                throw .notFound(field: "spans[\(index)].language", "no voice speaks '\(tag)'")
            }
        }
    }

    func voices() async throws -> [VoiceInfo] {
        [
            VoiceInfo(identifier: "gmw/en", name: "English", languages: ["en-GB", "en"]),
            VoiceInfo(identifier: "roa/pt", name: "Portuguese", languages: ["pt-PT", "pt"]),
        ]
    }
}

/// Health whose audio state a test can switch.
final class SwitchableHealth: HealthReporting {
    private let audioUp = Mutex(true)

    func setAudio(up: Bool) {
        audioUp.withLock { $0 = up }
    }

    func health() async -> HealthReport {
        let up = audioUp.withLock { $0 }
        return HealthReport(
            engine: .init(state: .ok, name: "tone"),
            audio: .init(state: up ? .ok : .unavailable, sink: "null", detail: up ? nil : "the sink went away"))
    }
}
