import AudioOutput
import Logging
import ServiceLifecycle
import SpeechModel
import Synchronization

/// Owns the audio sink: the one place that decides whether audio works, and that reopens the
/// sink with backoff while it does not.
///
/// Health, the speaker and the queue's `waitUntilAvailable()` all read the state from here, so
/// they cannot disagree with the loop that repairs it. The states, and the only moves between
/// them (`Phase.allows(_:)`):
///
/// ```
/// unopened ──▶ opening ──▶ ready
///                ▲   │       │  a failure under the sink in use
///                │   ▼       ▼
///                └── failed ◀┘
/// every state ──▶ stopped (graceful shutdown)
/// ```
///
/// - A failure moves `ready` to `failed` when the speaker reports one against the sink it was
///   lent (a write, a drain, or the flush of a cancel), or when the sink itself says it became
///   unavailable (`ReopenableAudioSink.whenUnavailable`: no timer looks while all is well, so an
///   idle daemon is not woken). A report against an earlier open is stale and ignored.
/// - From `failed` the run loop opens again: at once after a failure while playing, then after
///   a backoff doubling from `initialBackoff` to `maximumBackoff` while opens keep failing.
///   Opening a wedged device is bounded by the sink's open time limit; a device whose earlier
///   call is still blocked fails fast, so a retry costs neither time nor a thread.
public final class AudioSupervisor: Service, Sendable {
    /// Makes the sink; called again while none could be made (`auto` with no device at all).
    public typealias MakeSink = @Sendable () async throws -> any ReopenableAudioSink

    /// Where the supervisor is in keeping a sink working.
    public enum Phase: String, Sendable, Hashable, CaseIterable {
        /// Nothing opened yet.
        case unopened
        /// An open is under way.
        case opening
        /// The sink works: announcements are played.
        case ready
        /// The sink failed or would not open; the run loop opens it again.
        case failed
        /// Shut down: nothing is opened any more.
        case stopped

        /// Whether the supervisor may move from this phase to `next`.
        public func allows(_ next: Phase) -> Bool {
            switch (self, next) {
            case (.stopped, _): false
            case (_, .stopped): true
            case (.unopened, .opening), (.failed, .opening): true
            case (.opening, .ready), (.opening, .failed): true
            case (.ready, .failed): true
            default: false
            }
        }
    }

    /// What health reports about audio.
    public struct Status: Sendable, Hashable {
        /// Whether announcements can be played now.
        public var available: Bool
        /// The sink's name (`pulse`, `alsa:default`), or the spec while no sink exists.
        public var sink: String
        /// Why audio is unavailable, while it is.
        public var detail: String?
        /// The supervisor's phase.
        public var phase: Phase
    }

    /// The working sink as lent to one announcement, tagged with the open it belongs to.
    public struct Lease: Sendable {
        public let sink: any ReopenableAudioSink
        /// Counts successful opens; a failure reported under an older one is stale.
        let generation: UInt64
    }

    private struct State {
        private(set) var phase = Phase.unopened
        var sink: (any ReopenableAudioSink)?
        var detail: String?
        /// Successful opens so far.
        var generation: UInt64 = 0
        /// Opens that failed since the sink last worked; sizes the backoff.
        var failedOpens = 0
        /// When audio last stopped working, for the recovery log.
        var failedSince: ContinuousClock.Instant?
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Wakes the run loop when the phase changes; set while it waits.
        var wake: CheckedContinuation<Void, Never>?
        var woken = false

        /// Moves to `next` if `Phase.allows` it; false (and no change) otherwise.
        mutating func move(to next: Phase) -> Bool {
            guard phase.allows(next) else { return false }
            phase = next
            return true
        }

        /// Takes what a phase change releases: the availability waiters once ready or stopped,
        /// and the run loop.
        mutating func released() -> [CheckedContinuation<Void, Never>] {
            var released: [CheckedContinuation<Void, Never>] = []
            if phase == .ready || phase == .stopped {
                released = waiters
                waiters = []
            }
            if let wake {
                released.append(wake)
                self.wake = nil
            } else {
                woken = true
            }
            return released
        }
    }

    private let spec: String
    private let makeSink: MakeSink
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let state = Mutex(State())

    /// The wait after the first failed open; it doubles up to `maximumBackoff`.
    static let initialBackoff = Duration.milliseconds(50)
    /// The longest wait between opens. Short, because speech must resume soon after the sound
    /// server answers again; a failing open costs little (refused at once, or failing fast while
    /// an earlier call is still blocked).
    static let maximumBackoff = Duration.milliseconds(500)

    /// - Parameters:
    ///   - spec: the `--audio` value, named in health until a sink exists.
    ///   - makeSink: makes the sink.
    ///   - clock: times the backoff and the sink check.
    ///   - logger: where audio failures and recoveries are logged.
    public init(
        spec: String, makeSink: @escaping MakeSink, clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "speakd.audio")
    ) {
        self.spec = spec
        self.makeSink = makeSink
        self.clock = clock
        self.logger = logger
    }

    /// The state health reports. A ready sink that says it no longer works is reported
    /// unavailable at once, before the run loop has noticed.
    public var status: Status {
        state.withLock { state in
            let name = state.sink?.name ?? spec
            switch state.phase {
            case .ready:
                guard let sink = state.sink, !sink.isAvailable else {
                    return Status(available: true, sink: name, detail: nil, phase: .ready)
                }
                return Status(available: false, sink: name, detail: Self.describe(sink), phase: .ready)
            case .unopened:
                return Status(
                    available: false, sink: name, detail: "the audio sink has not been opened yet", phase: .unopened)
            case .opening, .failed:
                let detail = state.detail ?? "opening the audio sink"
                return Status(available: false, sink: name, detail: detail, phase: state.phase)
            case .stopped:
                return Status(available: false, sink: name, detail: "speakd is shutting down", phase: .stopped)
            }
        }
    }

    /// The sink, lent for one announcement, while the supervisor is ready.
    public func lease() -> Lease? {
        state.withLock { state in
            guard state.phase == .ready, let sink = state.sink else { return nil }
            return Lease(sink: sink, generation: state.generation)
        }
    }

    /// Opens the sink once (from `unopened` or `failed`); the run loop keeps trying after a failure.
    /// - Returns: whether audio works now.
    @discardableResult
    public func connect() async -> Bool {
        let start = state.withLock { state -> (go: Bool, sink: (any ReopenableAudioSink)?) in
            (state.move(to: .opening), state.sink)
        }
        guard start.go else { return state.withLock { $0.phase == .ready } }
        do {
            let sink: any ReopenableAudioSink
            if let existing = start.sink {
                sink = existing
            } else {
                sink = try await makeSink()
                sink.whenUnavailable { [weak self] in self?.sinkBecameUnavailable() }
                state.withLock { $0.sink = sink }
            }
            try await sink.reopen()
            let (opened, released, downtime) = state.withLock { state in
                guard state.move(to: .ready) else { return (false, state.released(), Duration?.none) }
                state.generation += 1
                state.detail = nil
                state.failedOpens = 0
                defer { state.failedSince = nil }
                return (true, state.released(), state.failedSince.map { ContinuousClock.now - $0 })
            }
            for continuation in released { continuation.resume() }
            guard opened else {
                // Shut down while opening: the device is not wanted any more.
                await sink.close()
                return false
            }
            var metadata: Logger.Metadata = ["speakd.sink": "\(sink.name)"]
            if let downtime { metadata["speakd.unavailable_for"] = "\(downtime)" }
            logger.info("audio sink available", metadata: metadata)
            return true
        } catch {
            let (failedOpens, released) = state.withLock { state in
                guard state.move(to: .failed) else { return (0, state.released()) }
                state.detail = Self.describe(error)
                state.failedOpens += 1
                if state.failedSince == nil { state.failedSince = .now }
                return (state.failedOpens, state.released())
            }
            for continuation in released { continuation.resume() }
            logger.log(
                level: failedOpens == 1 ? .info : .debug, "audio sink did not open",
                metadata: ["speakd.error": "\(Self.describe(error))", "speakd.attempt": "\(failedOpens)"])
            return false
        }
    }

    /// Reports that playing failed on the sink `lease` lent: health turns unavailable and the run
    /// loop reopens. Ignored when the sink has been reopened since it was lent.
    public func reportFailure(_ error: any Error, on lease: Lease) {
        fail(generation: lease.generation, detail: Self.describe(error))
    }

    /// The sink says it failed by itself: the open it belongs to fails, as if reported.
    private func sinkBecameUnavailable() {
        if let current = lease() { checkSink(of: current) }
    }

    /// Reports the sink's own failure, if it has one, after an announcement ended however it
    /// ended: a flush that timed out while cancelling is thrown away by playback, but the sink
    /// remembers it.
    public func checkSink(of lease: Lease) {
        guard !lease.sink.isAvailable else { return }
        fail(generation: lease.generation, detail: Self.describe(lease.sink))
    }

    /// Returns once the sink works (at once if it does); returns early when the task is
    /// cancelled or the supervisor stops.
    public func waitUntilAvailable() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    if state.phase == .ready || state.phase == .stopped || Task.isCancelled { return true }
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

    /// Keeps the sink working until graceful shutdown; then releases the device.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.supervise()
        }
        let (sink, released) = state.withLock { state in
            _ = state.move(to: .stopped)
            return (state.sink, state.released())
        }
        for continuation in released { continuation.resume() }
        await sink?.close()
    }

    // MARK: The loop

    private func supervise() async {
        while !Task.isCancelled {
            // A wake from before this look at the phase is stale; one after it is kept.
            let (phase, failedOpens) = state.withLock { state in
                state.woken = false
                return (state.phase, state.failedOpens)
            }
            switch phase {
            case .unopened:
                await connect()
            case .failed:
                // At once after a failure while playing; backing off while opens keep failing.
                if failedOpens > 0 {
                    try? await clock.sleep(for: backoff(afterFailedOpens: failedOpens))
                }
                if Task.isCancelled { return }
                await connect()
            case .ready:
                // Until a failure is reported, by the speaker or by the sink itself.
                await pause(for: nil)
            case .opening:
                // Someone else's `connect()` is under way; it wakes the loop when done.
                await pause(for: nil)
            case .stopped:
                return
            }
        }
    }

    /// The wait before the next open after `failedOpens` failed ones.
    func backoff(afterFailedOpens failedOpens: Int) -> Duration {
        var wait = Self.initialBackoff
        for _ in 1..<max(failedOpens, 1) {
            wait *= 2
            if wait >= Self.maximumBackoff { return Self.maximumBackoff }
        }
        return min(wait, Self.maximumBackoff)
    }

    private func fail(generation: UInt64, detail: String) {
        let released = state.withLock { state -> [CheckedContinuation<Void, Never>]? in
            guard state.phase == .ready, state.generation == generation, state.move(to: .failed) else { return nil }
            state.detail = detail
            state.failedOpens = 0
            state.failedSince = .now
            return state.released()
        }
        guard let released else {
            logger.debug("stale audio failure ignored", metadata: ["speakd.error": "\(detail)"])
            return
        }
        logger.warning("audio sink failed; reopening", metadata: ["speakd.error": "\(detail)"])
        for continuation in released { continuation.resume() }
    }

    /// Returns when the phase changes, when `duration` (if any) has passed, or when cancelled.
    private func pause(for duration: Duration?) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForWake() }
            if let duration {
                group.addTask { try? await self.clock.sleep(for: duration) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForWake() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let woken = state.withLock { state in
                    if state.woken || Task.isCancelled {
                        state.woken = false
                        return true
                    }
                    state.wake = continuation
                    return false
                }
                if woken { continuation.resume() }
            }
        } onCancel: {
            let wake = state.withLock { state in
                defer { state.wake = nil }
                return state.wake
            }
            wake?.resume()
        }
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? AudioOutputError { return error.message }
        return "\(error)"
    }

    private static func describe(_ sink: any ReopenableAudioSink) -> String {
        sink.lastError?.message ?? "the audio sink reported a failure"
    }
}
