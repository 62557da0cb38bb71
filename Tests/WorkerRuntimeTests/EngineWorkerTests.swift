import Foundation
import Logging
import PosixSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing
import WorkerRuntime

/// The runtime every engine's workers share, driven through real pipes by a test that plays the
/// worker's side of the frame protocol. The process the daemon would kill is a real `sleep`, so a
/// kill lands on a real process and its end is reaped as a worker's is.
@Suite("Engine worker runtime", .timeLimit(.minutes(1)))
struct EngineWorkerTests {
    /// A worker seen from both sides: the daemon's `EngineWorker`, and the pipe ends the test
    /// reads and writes as the worker.
    final class Harness: Sendable {
        let worker: EngineWorker
        let sleeper: SpawnedProcess
        /// The worker's standard input (read by the test), output and error (written by it);
        /// -1 once closed.
        private let theirs: Mutex<[Int32]>
        let idled = Atomic<Int>(0)
        let deaths = Mutex<[(error: EngineWorkerError, hadJob: Bool)]>([])
        let readies = Mutex<[(rate: Int, sandbox: String)]>([])

        init() throws {
            let streams = try StandardStreams()
            let sleeper = try SpawnedProcess(executable: "/bin/sleep", arguments: ["60"], environment: [])
            self.sleeper = sleeper
            theirs = Mutex(streams.theirs)
            // The callbacks reach the harness once it exists, as a worker's owner reaches its state.
            let owner = Mutex<Harness?>(nil)
            worker = EngineWorker(
                process: WorkerProcess(
                    pid: sleeper.pid, input: streams.input, output: streams.output, errors: streams.errors,
                    waitForExit: { .ended(sleeper.waitForExit()) }),
                callbacks: EngineWorker.Callbacks(
                    ready: { _, rate, sandbox in
                        owner.withLock { $0 }?.readies.withLock { $0.append((rate, sandbox)) }
                    },
                    idle: { _ in owner.withLock { $0 }?.idled.add(1, ordering: .relaxed) },
                    died: { _, error, job in owner.withLock { $0 }?.deaths.withLock { $0.append((error, job != nil)) }
                    },
                    requeue: { job in job.finish(throwing: EngineWorkerError.unavailable("requeued")) }),
                diagnostics: WorkerDiagnostics(logger: Logger(label: "test"), label: "test worker") { _ in true })
            owner.withLock { $0 = self }
        }

        private func descriptor(_ index: Int) -> Int32 { theirs.withLock { $0[index] } }

        /// Writes `frame` as the worker.
        func send(_ frame: WorkerFrame) throws {
            try frame.write(to: descriptor(1))
        }

        /// Reads the next frame the daemon sent the worker, with a blocking read on a thread of
        /// its own (never on a cooperative thread, which the daemon's side may need meanwhile).
        func received() async throws -> WorkerFrame? {
            let input = descriptor(0)
            return try await withCheckedThrowingContinuation { continuation in
                DetachedThread.start(name: "test-worker-read") {
                    do {
                        continuation.resume(returning: try WorkerFrame.read(from: input))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
        }

        /// Ends the worker's output, as a dead worker's ends.
        func closeOutput() {
            theirs.withLock { theirs in
                if theirs[1] >= 0 { close(theirs[1]) }
                theirs[1] = -1
            }
        }

        /// Kills the stand-in process and ends the worker's output, as a killed worker's ends.
        func die() {
            kill(sleeper.pid, SIGKILL)
            closeOutput()
        }

        deinit {
            kill(sleeper.pid, SIGKILL)
            theirs.withLock { theirs in
                for descriptor in theirs where descriptor >= 0 { close(descriptor) }
            }
        }
    }

    static func job(_ text: String, maxSamplesAhead: Int = 1 << 18) -> (
        RenderJob, AsyncThrowingStream<PCMChunk, any Error>
    ) {
        RenderJob.stream(
            text: text, work: WorkerJob(chunking: .streaming, input: Array(text.utf8)), maxSamplesAhead: maxSamplesAhead
        )
    }

    @Test("A job is sent as its frame; its events come with the samples after them; done ends it and frees the worker")
    func rendersAJob() async throws {
        let harness = try Harness()
        try harness.send(.ready(sampleRate: 22_050, sandbox: "seccomp"))
        let (job, stream) = Self.job("Platform four.")
        #expect(harness.worker.start(job))
        #expect(
            try await harness.received() == .job(WorkerJob(chunking: .streaming, input: Array("Platform four.".utf8))))
        let word = EngineEvent(kind: .word, sample: 0, textPosition: 1, length: 8)
        try harness.send(.events([word]))
        try harness.send(.pcm([1, 2, 3]))
        try harness.send(.pcm([4]))
        try harness.send(.done)
        var chunks: [PCMChunk] = []
        for try await chunk in stream { chunks.append(chunk) }
        #expect(chunks.map(\.samples) == [[1, 2, 3], [4]])
        #expect(chunks.map(\.events) == [[word], []])
        #expect(harness.readies.withLock { $0.map(\.rate) } == [22_050])
        #expect(harness.readies.withLock { $0.map(\.sandbox) } == ["seccomp"])
        #expect(harness.idled.load(ordering: .relaxed) == 1)
        #expect(!harness.worker.isRendering)
        harness.die()
    }

    @Test("Cancelling the listener sends the worker a cancel; its done frees the worker; a failure fails the next job")
    func cancelsAndFails() async throws {
        let harness = try Harness()
        let (job, stream) = Self.job("A long text.")
        #expect(harness.worker.start(job))
        #expect(
            try await harness.received() == .job(WorkerJob(chunking: .streaming, input: Array("A long text.".utf8))))
        try harness.send(.pcm([7]))
        // The listener takes the chunk, then waits for the next one: cancelled there, its stream
        // ends and the job is cancelled.
        let listener = Task {
            for try await _ in stream {}
        }
        try await Task.sleep(for: .milliseconds(100))
        listener.cancel()
        #expect(try await harness.received() == .cancel)
        try harness.send(.done)
        while harness.idled.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }

        let (next, nextStream) = Self.job("Next.")
        #expect(harness.worker.start(next))
        _ = try await harness.received()
        try harness.send(.failure("no voice"))
        await #expect(throws: EngineWorkerError.self) {
            for try await _ in nextStream {}
        }
        harness.die()
    }

    @Test("A worker that dies fails its job with how it ended, once, and takes no job after")
    func diesWithItsJob() async throws {
        let harness = try Harness()
        let (job, stream) = Self.job("Gate twelve.")
        #expect(harness.worker.start(job))
        _ = try await harness.received()
        harness.die()
        do {
            for try await _ in stream {}
            Issue.record("the job ended without an error")
        } catch {
            #expect("\(error)".contains("SIGKILL"), "\(error)")
        }
        while harness.deaths.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(harness.deaths.withLock { $0.map(\.hadJob) } == [true])
        #expect(harness.worker.isDead)
        let (late, _) = Self.job("Too late.")
        #expect(!harness.worker.start(late))
    }

    @Test("The stall watch kills a worker that sends nothing while rendering, and its job says so")
    func stallWatchKills() async throws {
        let harness = try Harness()
        let watch = StallWatch(limit: .milliseconds(300), interval: .milliseconds(100))
        let (job, stream) = Self.job("Silence.")
        #expect(harness.worker.start(job))
        watch.start { [worker = harness.worker] in worker.isDead ? nil : (worker.isRendering ? [worker] : []) }
        _ = try await harness.received()
        // The kill lands on the stand-in process; once it is a zombie its output is closed, as a
        // killed worker's is.
        let pid = harness.sleeper.pid
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            if stat.contains(") Z ") { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        harness.closeOutput()
        do {
            for try await _ in stream {}
            Issue.record("the job ended without an error")
        } catch {
            #expect("\(error)".contains("sent nothing for 0.3 s"), "\(error)")
        }
    }
}
