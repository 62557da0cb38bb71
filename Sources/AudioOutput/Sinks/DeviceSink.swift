import Logging
import SpeechModel
import SpeechRendering
import Synchronization

/// The engine behind every device sink: a `BlockingAudioDevice` driven from its own thread,
/// with an async API that returns or throws within bounded time.
///
/// Writes are cut into short pieces so a flush or cancel never waits behind a long write. Each
/// device call has a time limit; when one overruns, the thread is abandoned (it cleans up and
/// exits whenever the call returns) and the sink fails fast with `blocked` until it has; after
/// that the next call opens the device afresh on a new thread. At most `stuckThreadLimit` such
/// threads per device name exist in the process, however many sinks are made for the device.
final class DeviceSink: ReopenableAudioSink {
    let name: String
    let format: AudioFormat
    private let options: AudioSinkOptions
    private let pieceBytes: Int
    private let open: BlockingAudioDeviceOpener
    private let logger: Logger
    private let state = Mutex(State())
    /// Bytes the devices have taken since the sink was made.
    private let takenBytes = Atomic<Int>(0)
    /// Bytes the last counting flush left to be heard; -1 before one.
    private let keptBytes = Atomic<Int>(-1)
    /// When the audio written so far will have been played, measured after the last write.
    private let playout = Mutex<ContinuousClock.Instant?>(nil)
    /// The device's `bytesToStart` right after the last write, in frames.
    private let toStart = Mutex(0)
    /// Told when the sink becomes unavailable (`whenUnavailable`).
    private let unavailableHandler = Mutex<(@Sendable () -> Void)?>(nil)

    /// A flush that took longer than this waited on a stalled device.
    static let stalledFlush = Duration.milliseconds(500)

    /// The most threads per device name left blocked in a call before no new one is started.
    static let stuckThreadLimit = 1

    private struct State {
        var thread: DeviceThread?
        /// A thread given up on because a call overran; it still holds its device.
        var stuck: DeviceThread?
        var lastError: AudioOutputError?
    }

    /// - Parameters:
    ///   - piece: the longest slice of audio handed to the device in one call.
    ///   - open: opens the device; called on the device thread.
    init(
        name: String, format: AudioFormat, options: AudioSinkOptions,
        piece: Duration = .milliseconds(10), logger: Logger = Logger(label: "speakd.audio"),
        open: @escaping BlockingAudioDeviceOpener
    ) {
        self.name = name
        var logger = logger
        logger[metadataKey: "audio.sink"] = "\(name)"
        self.logger = logger
        self.format = format
        self.options = options
        self.pieceBytes = max(format.bytesPerFrame, format.byteCount(for: piece))
        self.open = open
    }

    deinit {
        state.withLock { $0.thread?.stop() }
    }

    /// False after a failed call until one succeeds, and while a timed-out call still blocks.
    var isAvailable: Bool {
        state.withLock { state in
            if let stuck = state.stuck, !stuck.hasExited { return false }
            return state.lastError == nil
        }
    }

    /// The error that made the sink unavailable, if any.
    var lastError: AudioOutputError? { state.withLock { $0.lastError } }

    func whenUnavailable(_ handler: @escaping @Sendable () -> Void) {
        unavailableHandler.withLock { $0 = handler }
    }

    private func reportUnavailable() {
        unavailableHandler.withLock { $0 }?()
    }

    func write(_ chunk: PCMChunk) async throws {
        guard !chunk.samples.isEmpty else { return }
        let samples = chunk.samples
        let pieceBytes = pieceBytes
        try await perform(interruptible: true) { thread, generation throws(AudioOutputError) in
            // A connection that died while the sink was idle (the sound server restarted) shows
            // only now: it is opened afresh once, rather than failing an announcement that
            // started after the server was back.
            var mayReopen = thread.openedDevice != nil
            var device = try thread.openDevice()
            var failure: AudioOutputError?
            samples.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    // A flush or cancel arrived: the rest of this chunk is not wanted.
                    guard thread.currentGeneration == generation else { return }
                    let end = min(offset + pieceBytes, bytes.count)
                    let piece = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
                    do throws(AudioOutputError) {
                        try thread.timed("write", limit: self.options.callTimeout) { () throws(AudioOutputError) in
                            try device.waitForRoom(piece.count, until: { thread.currentGeneration != generation })
                            guard thread.currentGeneration == generation else { return }
                            try device.write(piece)
                            self.takenBytes.add(piece.count, ordering: .relaxed)
                        }
                    } catch  where mayReopen && offset == 0 && !error.isTimeout {
                        mayReopen = false
                        let cause = error
                        thread.closeDevice(limit: self.options.callTimeout)
                        do throws(AudioOutputError) {
                            device = try thread.openDevice()
                        } catch {
                            // Why the stream was lost comes first: "cannot open" alone would
                            // hide that a headset's sink was removed under it.
                            failure = error.after(cause)
                            return
                        }
                        continue
                    } catch {
                        failure = error
                        return
                    }
                    mayReopen = false
                    offset = end
                }
            }
            if let failure { throw failure }
            let queued = device.queuedDuration()
            self.playout.withLock { $0 = queued.map { ContinuousClock.now + $0 } }
            let frames = (device.bytesToStart + self.format.bytesPerFrame - 1) / self.format.bytesPerFrame
            self.toStart.withLock { $0 = frames }
        }
    }

    var playedOutAt: ContinuousClock.Instant? { playout.withLock { $0 } }

    var framesToStart: Int { toStart.withLock { $0 } }

    func drain() async throws {
        // Nothing was written since the sink was made or closed.
        guard state.withLock({ $0.thread != nil || $0.stuck != nil }) else { return }
        try await perform(interruptible: true) { thread, generation throws(AudioOutputError) in
            guard let device = thread.openedDevice else { return }
            try thread.timed("drain", limit: self.options.callTimeout) { () throws(AudioOutputError) in
                try device.drain(until: { thread.currentGeneration != generation })
            }
        }
    }

    var framesTaken: Int? { takenBytes.load(ordering: .relaxed) / format.bytesPerFrame }

    var heardAfterFlush: Duration? {
        let bytes = keptBytes.load(ordering: .relaxed)
        return bytes < 0 ? nil : format.duration(frames: bytes / format.bytesPerFrame)
    }

    func flush() async throws {
        _ = try await flush(counting: false)
    }

    func flushCountingUnplayed() async throws -> FlushPosition? {
        try await flush(counting: true)
    }

    /// Flushes; when `counting`, first asks the device how much of what it took is unplayed.
    private func flush(counting: Bool) async throws -> FlushPosition? {
        // Stop the running write at its next piece before queueing the flush behind it.
        let idle = state.withLock { state in
            state.thread?.interrupt()
            return state.thread == nil && state.stuck == nil
        }
        let bytesPerFrame = format.bytesPerFrame
        guard !idle else {
            return counting
                ? FlushPosition(taken: takenBytes.load(ordering: .relaxed) / bytesPerFrame, unplayed: 0) : nil
        }
        let requested = ContinuousClock.now
        let position = Mutex<FlushPosition?>(nil)
        try await perform(interruptible: false) { thread, _ throws(AudioOutputError) in
            let taken = self.takenBytes.load(ordering: .relaxed) / bytesPerFrame
            guard let device = thread.openedDevice else {
                position.withLock { $0 = FlushPosition(taken: taken, unplayed: 0) }
                return
            }
            try thread.timed("flush", limit: self.options.callTimeout) { () throws(AudioOutputError) in
                // Read just before the flush, on the thread that writes: nothing is taken between.
                let before = counting ? device.unplayedBytes() : nil
                try device.flush()
                // What is still unplayed after it is not taken back (a PulseAudio null sink keeps
                // about its last block), so it is heard: only the difference was discarded.
                if let before {
                    let kept = min(before, device.unplayedBytes() ?? 0)
                    self.keptBytes.store(kept, ordering: .relaxed)
                    let discarded = before - kept
                    position.withLock {
                        $0 = FlushPosition(taken: taken, unplayed: min(taken, discarded / bytesPerFrame))
                    }
                }
            }
            // The flush waited long behind a call the device did not answer (a frozen sound
            // server that resumed): such a stream can block the next write past the call limit
            // (seen with PulseAudio), so the next write opens afresh instead.
            if ContinuousClock.now - requested > Self.stalledFlush {
                thread.closeDevice(limit: self.options.callTimeout)
            }
        }
        return position.withLock { $0 }
    }

    /// Opens the device now (closing it first if open), to probe it or recover after a failure.
    func reopen() async throws {
        try await perform(interruptible: false) { thread, _ throws(AudioOutputError) in
            thread.closeDevice(limit: self.options.callTimeout)
            _ = try thread.openDevice()
        }
    }

    func close() async {
        let thread = state.withLock { state -> DeviceThread? in
            defer { state.thread = nil }
            return state.thread
        }
        guard let thread else { return }
        thread.interrupt()
        // Closing says nothing of whether the device works: a sink that never opened (no sound
        // server) must not be logged "works again" as it is closed, on every retry and at exit.
        try? await perform(on: thread, interruptible: false, recording: false) { thread, _ throws(AudioOutputError) in
            thread.closeDevice(limit: self.options.callTimeout)
        }
        thread.stop()
    }

    // MARK: Running jobs with a time limit

    private func currentThread() throws(AudioOutputError) -> DeviceThread {
        try state.withLock { (state) throws(AudioOutputError) -> DeviceThread in
            if let stuck = state.stuck {
                guard stuck.hasExited else { throw .blocked(sink: name) }
                state.stuck = nil
            }
            if let thread = state.thread { return thread }
            // Another sink for the same device (`auto` makes fresh ones on every attempt) left a
            // thread blocked in a call that may never return: starting one more per retry would
            // leak a thread each time, so wait for it like for this sink's own.
            guard DeviceThread.stuckThreads(sinkName: name) < Self.stuckThreadLimit else {
                throw .blocked(sink: name)
            }
            let thread = DeviceThread(sinkName: name, openTimeout: options.openTimeout, open: open)
            state.thread = thread
            return thread
        }
    }

    private func perform(
        interruptible: Bool,
        _ body: @escaping @Sendable (DeviceThread, UInt64) throws(AudioOutputError) -> Void
    ) async throws {
        let thread: DeviceThread
        do {
            thread = try currentThread()
        } catch {
            record(.failure(error))
            throw error
        }
        try await perform(on: thread, interruptible: interruptible, body)
    }

    /// Runs `body` on `thread` within the call limit; with `recording`, its outcome is the
    /// sink's availability (a failure after success is logged once, and so is a recovery).
    private func perform(
        on thread: DeviceThread, interruptible: Bool, recording: Bool = true,
        _ body: @escaping @Sendable (DeviceThread, UInt64) throws(AudioOutputError) -> Void
    ) async throws {
        if interruptible { try Task.checkCancellation() }
        let generation = thread.currentGeneration
        let pending = PendingCall()
        thread.enqueue(
            DeviceThread.Job(
                run: { thread in
                    // Cancelled or timed out while queued: the caller has gone.
                    guard !pending.isResolved else { return }
                    do throws(AudioOutputError) {
                        try body(thread, generation)
                        pending.resolve(.success(()))
                    } catch {
                        pending.resolve(.failure(error))
                        // The device may be gone (server restarted, unplugged): open it afresh
                        // next time. Closing may block too, so the caller has its answer first.
                        thread.closeDevice(limit: self.options.callTimeout)
                    }
                },
                fail: { pending.resolve(.failure($0)) }
            ))

        let watchdog = Task { [options] in
            let interval = min(options.callTimeout, options.openTimeout) / 4
            while !pending.isResolved {
                try await Task.sleep(for: min(interval, .milliseconds(50)))
                if let overdue = thread.overdueCall() {
                    let error = AudioOutputError.timedOut(
                        sink: self.name, operation: overdue.name, limit: overdue.limit)
                    self.abandon(thread, error: error, answering: pending)
                }
            }
        }
        defer { watchdog.cancel() }

        let result: Result<Void, any Error>
        if interruptible {
            result = await withTaskCancellationHandler {
                await pending.result
            } onCancel: {
                thread.interrupt()
                pending.resolve(.failure(CancellationError()))
            }
        } else {
            result = await pending.result
        }
        if recording { record(result) }
        try result.get()
    }

    private func record(_ result: Result<Void, any Error>) {
        let change = state.withLock { state -> (failed: AudioOutputError?, recovered: Bool) in
            switch result {
            case .success:
                defer { state.lastError = nil }
                return (nil, state.lastError != nil)
            case .failure(let error as AudioOutputError):
                // Report a failure once, not on every fast-failing call after it.
                defer { state.lastError = error }
                return (state.lastError == error ? nil : error, false)
            case .failure:
                return (nil, false)
            }
        }
        if let failed = change.failed {
            logger.info(
                "audio sink failed", metadata: ["audio.error": "\(failed.message)", "audio.kind": "\(failed.kind)"])
            reportUnavailable()
        }
        if change.recovered {
            logger.info("audio sink works again")
        }
    }

    /// Gives up on a thread whose call overran: later calls fail fast until it exits.
    private func abandon(_ thread: DeviceThread, error: AudioOutputError, answering pending: PendingCall) {
        logger.info(
            "audio device call overran its limit; leaving its thread behind",
            metadata: ["audio.error": "\(error.message)"])
        state.withLock { state in
            if state.thread === thread { state.thread = nil }
            state.stuck = thread
        }
        // Counted as stuck before anyone hears of it, so a retry cannot start a second thread;
        // answered before interrupting: an interrupted job finishes early and would answer success.
        thread.abandon(failingQueuedWith: error)
        pending.resolve(.failure(error))
        // Ends any wait loop the thread is in, so only a call stuck in the device keeps it.
        thread.interrupt()
        reportUnavailable()
    }
}

/// The outcome of one job, delivered once to one waiting task, by whichever comes first: the
/// device thread, the watchdog or cancellation.
final class PendingCall: Sendable {
    private struct State {
        var result: Result<Void, any Error>?
        var waiter: CheckedContinuation<Result<Void, any Error>, Never>?
    }

    private let state = Mutex(State())

    var isResolved: Bool { state.withLock { $0.result != nil } }

    func resolve(_ result: Result<Void, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<Void, any Error>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    var result: Result<Void, any Error> {
        get async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Result<Void, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
