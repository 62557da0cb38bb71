import AudioOutput
import Logging
import ServiceLifecycle
import SpeechModel
import Synchronization

/// Owns the audio sink: knows whether it works, and reconnects it with backoff while it does not.
///
/// Speaking never retries by itself: a failed announcement finishes `failed`, the supervisor is
/// told, and its `run()` loop reopens the sink (or, for `auto`, looks for a sink again) with
/// exponential backoff until it works. Health reads the state from here, and the queue's
/// `waitUntilAvailable()` waits for it.
public final class AudioSupervisor: Service, Sendable {
    /// Makes the sink; called again while none could be made (`auto` with no device at all).
    public typealias MakeSink = @Sendable () async throws -> any ReopenableAudioSink

    /// What health reports about audio.
    public struct Status: Sendable, Hashable {
        /// Whether announcements can be played now.
        public var available: Bool
        /// The sink's name (`pulse`, `alsa:default`), or the spec while no sink exists.
        public var sink: String
        /// The last failure while unavailable.
        public var detail: String?
    }

    private struct State {
        var sink: (any ReopenableAudioSink)?
        var available = false
        var detail: String?
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Resumed to wake the reconnect loop when a failure is reported.
        var failureSignal: CheckedContinuation<Void, Never>?
    }

    private let spec: String
    private let makeSink: MakeSink
    private let clock: any Clock<Duration>
    private let initialBackoff: Duration
    private let maximumBackoff: Duration
    private let logger: Logger
    private let state = Mutex(State())

    /// - Parameters:
    ///   - spec: the `--audio` value, named in health until a sink exists.
    ///   - makeSink: makes the sink.
    ///   - clock: times the backoff.
    ///   - initialBackoff: the first wait between reconnect attempts; it doubles up to `maximumBackoff`.
    ///   - logger: where audio failures and recoveries are logged.
    public init(
        spec: String, makeSink: @escaping MakeSink, clock: any Clock<Duration> = ContinuousClock(),
        initialBackoff: Duration = .milliseconds(250), maximumBackoff: Duration = .seconds(5),
        logger: Logger = Logger(label: "speakd.audio")
    ) {
        self.spec = spec
        self.makeSink = makeSink
        self.clock = clock
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.logger = logger
    }

    /// The state health reports.
    public var status: Status {
        state.withLock { state in
            let available = state.available && (state.sink?.isAvailable ?? false)
            return Status(
                available: available, sink: state.sink?.name ?? spec,
                detail: available ? nil : state.detail ?? "the audio sink has not been opened yet")
        }
    }

    /// The sink, when one works.
    public var sink: (any ReopenableAudioSink)? {
        state.withLock { $0.available ? $0.sink : nil }
    }

    /// Opens the sink once; on failure the reconnect loop of `run()` keeps trying.
    /// - Returns: whether audio works now.
    @discardableResult
    public func connect() async -> Bool {
        do {
            let existing = state.withLock { $0.sink }
            let sink: any ReopenableAudioSink
            if let existing {
                try await existing.reopen()
                sink = existing
            } else {
                sink = try await makeSink()
                try await sink.reopen()
            }
            let waiters = state.withLock { state in
                state.sink = sink
                state.available = true
                state.detail = nil
                defer { state.waiters = [] }
                return state.waiters
            }
            logger.info("audio sink available", metadata: ["speakd.sink": "\(sink.name)"])
            for waiter in waiters { waiter.resume() }
            return true
        } catch {
            state.withLock { state in
                state.available = false
                state.detail = Self.describe(error)
            }
            return false
        }
    }

    /// Called when playing failed on the sink; health turns unavailable and reconnecting starts.
    public func reportFailure(_ error: any Error) {
        let signal = state.withLock { state in
            state.available = false
            state.detail = Self.describe(error)
            defer { state.failureSignal = nil }
            return state.failureSignal
        }
        logger.warning("audio sink failed", metadata: ["speakd.error": "\(Self.describe(error))"])
        signal?.resume()
    }

    /// Returns once the sink works (at once if it does); returns early when the task is cancelled.
    public func waitUntilAvailable() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    if state.available || Task.isCancelled { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            // Cancelled waiters are all released: the caller re-checks what it waited for.
            let waiters = state.withLock { state in
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Reconnects with backoff whenever audio is unavailable, until graceful shutdown; then
    /// releases the device.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if self.state.withLock({ $0.available }) {
                    await self.waitForFailure()
                    continue
                }
                var backoff = self.initialBackoff
                while !Task.isCancelled, !(await self.connect()) {
                    self.logger.debug(
                        "audio sink still unavailable",
                        metadata: ["speakd.retry": "\(backoff)", "speakd.error": "\(self.status.detail ?? "")"])
                    try? await self.clock.sleep(for: backoff)
                    backoff = min(backoff * 2, self.maximumBackoff)
                }
            }
        }
        let sink = state.withLock { state in
            state.available = false
            state.detail = "speakd is shutting down"
            return state.sink
        }
        await sink?.close()
    }

    private func waitForFailure() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let failedAlready = state.withLock { state in
                    if !state.available || Task.isCancelled { return true }
                    state.failureSignal = continuation
                    return false
                }
                if failedAlready { continuation.resume() }
            }
        } onCancel: {
            let signal = state.withLock { state in
                defer { state.failureSignal = nil }
                return state.failureSignal
            }
            signal?.resume()
        }
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? AudioOutputError { return error.message }
        return "\(error)"
    }
}
