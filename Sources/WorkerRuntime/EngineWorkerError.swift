#if canImport(Glibc)
import Glibc
#endif

/// A job that failed in its engine worker (espeak-ng's or Piper's), not because of its input (that
/// is checked before a worker sees it) but because the worker died, stalled or could not be started.
public struct EngineWorkerError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case crashed, exited, stalled, failed, unavailable
    }
    private let code: Code
    /// The signal that killed the worker, for `crashed`.
    private var signal: Int32? = nil
    /// What happened, for the `finished` event's `detail` and the HTTP error's message.
    public let description: String

    /// The worker was killed by `signal` while rendering.
    package static func crashed(signal: Int32) -> EngineWorkerError {
        .init(code: .crashed, signal: signal, description: "engine worker crashed: \(signalName(signal))")
    }

    /// Whether the job's own input crashed the worker, so would crash the next one too: a signal
    /// other than SIGKILL (which is a stall, the kernel's out-of-memory killer, an operator, or
    /// the template's end).
    package var isCrashByInput: Bool {
        code == .crashed && signal != nil && signal != SIGKILL
    }

    /// The worker exited with `status` while rendering.
    package static func exited(status: Int32) -> EngineWorkerError {
        .init(code: .exited, description: "engine worker exited with status \(status)")
    }

    /// The worker ended and its template (stopped or hung) did not say how within `limit`.
    package static func ended(unreportedAfter limit: Duration) -> EngineWorkerError {
        .init(
            code: .exited,
            description: "engine worker ended; its template did not say how within \(limit)")
    }

    /// The worker sent nothing for `seconds` while rendering and was killed.
    package static func stalled(seconds: Double) -> EngineWorkerError {
        .init(code: .stalled, description: "engine worker sent nothing for \(seconds) s and was stopped")
    }

    /// The worker reported that the job failed.
    package static func failed(_ message: String) -> EngineWorkerError {
        .init(code: .failed, description: "engine worker: \(message)")
    }

    /// No worker could be started.
    package static func unavailable(_ message: String) -> EngineWorkerError {
        .init(code: .unavailable, description: "no engine worker: \(message)")
    }

    /// `SIGSEGV` for 11: the names an operator looks up, the number for the rest.
    package static func signalName(_ signal: Int32) -> String {
        let names: [Int32: String] = [
            SIGSEGV: "SIGSEGV", SIGABRT: "SIGABRT", SIGKILL: "SIGKILL", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
            SIGILL: "SIGILL", SIGTERM: "SIGTERM", SIGSYS: "SIGSYS", SIGTRAP: "SIGTRAP",
        ]
        return names[signal] ?? "signal \(signal)"
    }
}
