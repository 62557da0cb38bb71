import AnnouncementIntake
import AnnouncementQueue
import Dispatch
import FoundationEssentials
import Logging
import SpeakAPI
import SpeakState
import Synchronization

/// Writes the audit log: one row per announcement, opened when it is queued and closed when it
/// finishes, and one per refusal (`AuditLog`).
///
/// Every write goes through one serial queue, so the rows change in the order the events came.
/// A `queued` waits until its row is on disk, so an announcement is accepted (and its id
/// answered) only once a `kill -9` right after cannot lose it; a `finished` waits too, so no
/// client learns an outcome that a crash could lose. `started`, `repeat` and refusals are handed
/// over without waiting. A write that fails (a full disk) is logged once and makes `problem` say so;
/// speaking goes on. The next new row that is written clears it: an update of a row can succeed
/// in the space a full disk still has, and says nothing of whether rows can be added.
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
    private let writes = DispatchQueue(label: "speakd.audit")
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var problem: String?
        var writesSincePrune = 0
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
    /// they finished) and prunes; returns how many rows were closed.
    public func recover(now: Date = Date()) -> Int {
        writes.sync {
            let closed = attempt("close the rows left open") {
                try log.closeUnfinished(
                    reason: FinishReason.failed.rawValue,
                    detail: "speakd stopped before it finished (killed, crashed or a power cut)", at: now)
            }
            _ = attempt("prune") { try log.prune(settings.retention, now: now) }
            return closed?.count ?? 0
        }
    }

    public func record(_ event: AnnouncementEvent) {
        switch event.type {
        case .queued:
            let entry = entry(queued: event)
            // Waits: the announcement is accepted only once its row is durable.
            writes.sync {
                _ = attempt("record a queued announcement", addsRow: true) { try log.opened(entry) }
            }
        case .started:
            writes.async { [self] in
                _ = attempt("record a start") { try log.started(id: event.id, at: event.timestamp) }
            }
        case .repeat:
            guard let original = event.repeatOf else { return }
            writes.async { [self] in _ = attempt("record a repeat") { try log.repeated(id: original) } }
        case .finished:
            // Waits: the event goes out only once its row is durable.
            writes.sync {
                _ = attempt("record an outcome") {
                    try log.finished(
                        id: event.id, reason: (event.reason ?? .failed).rawValue, detail: event.detail,
                        at: event.timestamp)
                }
            }
        default:
            return
        }
    }

    public func refused(_ error: IntakeError, origin: AnnouncementOrigin, output: String?) {
        let response = error.errorResponse.error
        let entry = AuditEntry(
            seq: nil, id: nil, front: origin.front, origin: origin.detail, output: output, priority: nil,
            queued: Date(), started: nil, finished: nil, reason: nil,
            detail: response.field.map { "\($0): \(response.message)" } ?? response.message, error: response.code,
            repeats: 0, schedule: origin.schedule, text: nil, isPrivate: false)
        writes.async { [self] in _ = attempt("record a refusal", addsRow: true) { try log.refused(entry) } }
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

    /// Runs one write on the writer queue; a failure is logged and kept in `problem`.
    /// - Parameter addsRow: whether it inserts a row, and so its success clears `problem`.
    private func attempt<Result>(_ what: String, addsRow: Bool = false, _ write: () throws -> Result) -> Result? {
        do {
            let result = try write()
            let prune = state.withLock { state -> Bool in
                if addsRow { state.problem = nil }
                state.writesSincePrune += 1
                guard state.writesSincePrune >= settings.pruneEvery else { return false }
                state.writesSincePrune = 0
                return true
            }
            if prune { _ = try? log.prune(settings.retention, now: Date()) }
            return result
        } catch {
            let first = state.withLock { state -> Bool in
                defer { state.problem = "the audit log cannot be written: \(error)" }
                return state.problem == nil
            }
            if first {
                logger.error(
                    "audit log write failed; speaking goes on",
                    metadata: ["speakd.audit": "\(what)", "speakd.error": "\(error)"])
            }
            return nil
        }
    }
}
