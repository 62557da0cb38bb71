import AnnouncementIntake
import AnnouncementQueue
import FoundationEssentials
import Logging
import SpeakAPI
import SpeakService
import SpeakState
import Synchronization

/// Writes the audit log: one row per announcement, opened when it is queued and closed when it
/// finishes, and one per refusal (`AuditLog`).
///
/// It is the event stream's recorder stage, not part of the queue: the stream hands it the
/// records that came in while the previous batch was being written, and it writes them in one
/// transaction (a group commit) on the database's writer queue, so neither the queue nor a
/// cooperative thread waits out an fsync. The stream holds a `queued` or `finished` back from
/// every client until its batch is durable, so an announcement is answered, and an outcome told,
/// only once a `kill -9` right after cannot lose it. `started` and `repeat` go out at once and
/// are written in the next batch; refusals are written in batches of their own.
///
/// A write that fails (a full disk) is logged once and makes `problem` say so; speaking goes on.
/// A failed batch is written again one change at a time, so what still fits is kept. The next new
/// row that is written clears `problem`: an update of a row can succeed in the space a full disk
/// still has, and says nothing of whether rows can be added.
public final class AuditRecorder: AnnouncementRecorder, RefusalRecorder, Sendable {
    /// What goes into the log.
    public struct Settings: Sendable {
        /// Whether texts are stored (`--audit-text`); a private text never is.
        public var storesText = true
        /// How long and how many rows are kept.
        public var retention = AuditRetention()
        /// Pruning runs after this many writes (and at start).
        public var pruneEvery = 512

        public init(storesText: Bool = true, retention: AuditRetention = AuditRetention()) {
            self.storesText = storesText
            self.retention = retention
        }
    }

    private let log: AuditLog
    private let settings: Settings
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var problem: String?
        var writesSincePrune = 0
        /// Refusals waiting for the next batch.
        var refusals: [AuditEntry] = []
        /// Whether a task is writing refusals.
        var writesRefusals = false
    }

    /// - Parameters:
    ///   - log: the database's audit log.
    ///   - settings: texts and retention.
    ///   - logger: where failed writes are reported.
    public init(log: AuditLog, settings: Settings = Settings(), logger: Logger) {
        self.log = log
        self.settings = settings
        self.logger = logger
    }

    /// Why the log cannot be written now (a full disk), or nil when it can.
    public var problem: String? { state.withLock { $0.problem } }

    /// Gives the rows a killed daemon left open their outcome (`failed`: speakd stopped before
    /// they finished) and prunes; returns how many rows were closed. Runs at start, before any
    /// announcement is accepted.
    public func recover(now: Date = Date()) -> Int {
        let closed = attempt("close the rows left open") {
            try log.closeUnfinished(
                reason: FinishReason.failed.rawValue,
                detail: "speakd stopped before it finished (killed, crashed or a power cut)", at: now)
        }
        _ = attempt("prune") { try log.prune(settings.retention, now: now) }
        return closed?.count ?? 0
    }

    /// Writes the records of `events` in one transaction on the database's writer queue and
    /// calls `done` there once they are durable. A batch that fails is written again one change
    /// at a time before `done`: an update can fit where a new row does not.
    public func record(_ events: [AnnouncementEvent], then done: @escaping @Sendable () -> Void) {
        let changes = events.compactMap(change)
        guard !changes.isEmpty else { return done() }
        log.apply(changes) { result in
            switch result {
            case .success:
                self.succeeded(count: changes.count, addsRow: changes.contains(where: \.opens))
                done()
            case .failure(let error):
                self.failed("record \(changes.count) changes", error)
                self.recordEach(changes[...], then: done)
            }
        }
    }

    /// Writes `changes` one transaction each, in order, then calls `done`.
    private func recordEach(_ changes: ArraySlice<AuditChange>, then done: @escaping @Sendable () -> Void) {
        guard let change = changes.first else { return done() }
        log.apply([change]) { result in
            switch result {
            case .success: self.succeeded(count: 1, addsRow: change.opens)
            case .failure(let error): self.failed("record a change", error)
            }
            self.recordEach(changes.dropFirst(), then: done)
        }
    }

    public func refused(_ error: SpeakError, origin: AnnouncementOrigin, output: String?) {
        let response = error.response.error
        let entry = AuditEntry(
            seq: nil, id: nil, front: origin.front, origin: origin.detail, output: output, priority: nil,
            queued: Date(), started: nil, finished: nil, reason: nil,
            detail: response.field.map { "\($0): \(response.message)" } ?? response.message, error: response.code,
            repeats: 0, schedule: origin.schedule, text: nil, isPrivate: false)
        let starts = state.withLock { state -> Bool in
            state.refusals.append(entry)
            defer { state.writesRefusals = true }
            return !state.writesRefusals
        }
        if starts {
            Task.detached { await self.writeRefusals() }
        }
    }

    /// Writes the refusals waiting, a batch at a time, until none waits.
    private func writeRefusals() async {
        while true {
            let batch = state.withLock { state -> [AuditEntry]? in
                guard !state.refusals.isEmpty else {
                    state.writesRefusals = false
                    return nil
                }
                defer { state.refusals = [] }
                return state.refusals
            }
            guard let batch else { return }
            do {
                try await log.refused(batch)
                succeeded(count: batch.count, addsRow: true)
            } catch {
                failed("record a refusal", error)
            }
        }
    }

    /// The change an event makes, or nil for one that makes none.
    private func change(_ event: AnnouncementEvent) -> AuditChange? {
        switch event.type {
        case .queued:
            return .opened(entry(queued: event))
        case .started:
            return .started(id: event.id, at: event.timestamp)
        case .repeat:
            return event.repeatOf.map { .repeated(id: $0) }
        case .finished:
            return .finished(
                id: event.id, reason: (event.reason ?? .failed).rawValue, detail: event.detail, at: event.timestamp)
        default:
            return nil
        }
    }

    /// The row of an announcement just queued.
    private func entry(queued event: AnnouncementEvent) -> AuditEntry {
        let origin = event.origin ?? .local
        return AuditEntry(
            seq: nil, id: event.id, front: origin.front, origin: origin.detail, output: event.output,
            priority: event.priority.rawValue, queued: event.timestamp, started: nil, finished: nil, reason: nil,
            detail: nil, error: nil, repeats: 0, schedule: origin.schedule,
            text: event.isPrivate || !settings.storesText ? nil : event.text, isPrivate: event.isPrivate)
    }

    /// Counts `count` writes; prunes (on the writer queue) every `pruneEvery`.
    /// - Parameter addsRow: whether a row was inserted, and so `problem` is cleared.
    private func succeeded(count: Int, addsRow: Bool) {
        let prune = state.withLock { state -> Bool in
            if addsRow { state.problem = nil }
            state.writesSincePrune += count
            guard state.writesSincePrune >= settings.pruneEvery else { return false }
            state.writesSincePrune = 0
            return true
        }
        if prune {
            let log = log
            let retention = settings.retention
            Task.detached { try? await log.pruneOnWriter(retention, now: Date()) }
        }
    }

    /// Logs the first failure and keeps it in `problem`.
    private func failed(_ what: String, _ error: any Error) {
        let first = state.withLock { state -> Bool in
            defer { state.problem = "the audit log cannot be written: \(error)" }
            return state.problem == nil
        }
        if first {
            logger.error(
                "audit log write failed; speaking goes on",
                metadata: ["speakd.audit": "\(what)", "speakd.error": "\(error)"])
        }
    }

    /// Runs one write at start; a failure is logged and kept in `problem`.
    private func attempt<Result>(_ what: String, _ write: () throws -> Result) -> Result? {
        do {
            return try write()
        } catch {
            failed(what, error)
            return nil
        }
    }
}
