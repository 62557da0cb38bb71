import FoundationEssentials
import PosixSupport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One dedicated thread that owns one device and runs its blocking calls in order.
///
/// Blocking C calls never run on Swift's cooperative pool: a wedged device would starve every
/// task in the process. The thread records when each device call started, so a watchdog on the
/// waiting side can tell a slow call from a stuck one and give up on the thread (`abandon()`).
/// An abandoned thread finishes its stuck call whenever it returns, closes its device and exits.
final class DeviceThread: @unchecked Sendable {
    // Safe: `jobs`, `call`, `abandoned`, `stopping` and `exited` are read and written only while
    // `condition` is locked; `device` is touched only by the thread itself; `generation` is atomic.
    private let condition = ConditionLock()
    private var jobs: [Job] = []
    private var call: (name: String, started: ContinuousClock.Instant, limit: Duration)?
    private var abandoned = false
    private var stopping = false
    private var exited = false
    private var device: (any BlockingAudioDevice)?
    private let generation = Atomic<UInt64>(0)

    let sinkName: String
    private let open: BlockingAudioDeviceOpener
    private let openTimeout: Duration

    /// A unit of work for the thread; `fail` is called instead of `run` when the thread is
    /// abandoned or stops before reaching it.
    struct Job {
        var run: (DeviceThread) -> Void
        var fail: (AudioOutputError) -> Void
    }

    init(sinkName: String, openTimeout: Duration, open: @escaping BlockingAudioDeviceOpener) {
        self.sinkName = sinkName
        self.openTimeout = openTimeout
        self.open = open
        DetachedThread.start(name: "speakd.audio \(sinkName)") { [self] in self.runLoop() }
    }

    // MARK: Called from any thread

    /// The interrupt generation; a job started under an older one stops at its next step.
    var currentGeneration: UInt64 { generation.load(ordering: .acquiring) }

    /// Makes the running write or drain stop at its next step and skips queued ones.
    func interrupt() {
        generation.add(1, ordering: .acquiringAndReleasing)
    }

    func enqueue(_ job: Job) {
        condition.lock()
        if abandoned || exited || stopping {
            let stuck = abandoned
            condition.unlock()
            job.fail(stuck ? .blocked(sink: sinkName) : .openFailed(sink: sinkName, "the sink was closed meanwhile"))
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// The device call that has been running longer than its limit, if any.
    func overdueCall(now: ContinuousClock.Instant = .now) -> (name: String, limit: Duration)? {
        condition.lock()
        defer { condition.unlock() }
        guard let call, now - call.started > call.limit else { return nil }
        return (call.name, call.limit)
    }

    /// Gives up on the thread: queued jobs fail with `error`, the thread exits once its current
    /// call returns.
    func abandon(failingQueuedWith error: AudioOutputError) {
        condition.lock()
        if !abandoned && !exited { Self.stuck.withLock { $0[sinkName, default: 0] += 1 } }
        abandoned = true
        let dropped = jobs
        jobs = []
        condition.signal()
        condition.unlock()
        for job in dropped { job.fail(error) }
    }

    /// Lets the thread exit after the jobs already queued.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    /// True once the thread has returned from its last call and exited.
    var hasExited: Bool {
        condition.lock()
        defer { condition.unlock() }
        return exited
    }

    // MARK: Threads given up on

    /// Abandoned threads that have not exited yet, by sink name.
    private static let stuck = Mutex<[String: Int]>([:])

    /// How many threads of sinks named `sinkName` were given up on and are still blocked in a
    /// device call. A call that never returns keeps its thread forever, so whoever would start
    /// another thread for the same device checks this first (see `DeviceSink`).
    static func stuckThreads(sinkName: String) -> Int {
        stuck.withLock { $0[sinkName] ?? 0 }
    }

    // MARK: Called on the thread, from jobs

    /// Runs one device call, recording it for the watchdog.
    func timed<T, E: Error>(
        _ name: String, limit: Duration, _ body: () throws(E) -> T
    ) throws(E) -> T {
        condition.lock()
        call = (name, .now, limit)
        condition.unlock()
        defer {
            condition.lock()
            call = nil
            condition.unlock()
        }
        return try body()
    }

    /// The open device, opening it first if needed.
    func openDevice() throws(AudioOutputError) -> any BlockingAudioDevice {
        if let device { return device }
        let opened = try timed("open", limit: openTimeout) { () throws(AudioOutputError) in try open() }
        device = opened
        return opened
    }

    /// The device if it is open; nil when nothing has been written since it was last closed.
    var openedDevice: (any BlockingAudioDevice)? { device }

    /// Closes the device, so the next call opens it again.
    func closeDevice(limit: Duration) {
        guard let device else { return }
        self.device = nil
        timed("close", limit: limit) { device.close() }
    }

    // MARK: The thread

    private func runLoop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !abandoned && !stopping {
                condition.wait()
            }
            if abandoned || jobs.isEmpty {
                condition.unlock()
                break
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.run(self)
        }
        if let device {
            self.device = nil
            device.close()
        }
        condition.lock()
        exited = true
        if abandoned {
            Self.stuck.withLock { stuck in
                stuck[sinkName, default: 1] -= 1
                if stuck[sinkName] == 0 { stuck[sinkName] = nil }
            }
        }
        let dropped = jobs
        jobs = []
        condition.unlock()
        for job in dropped { job.fail(.blocked(sink: sinkName)) }
    }
}
