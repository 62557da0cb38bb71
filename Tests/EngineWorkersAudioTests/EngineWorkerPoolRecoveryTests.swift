import EspeakEngine
import Foundation
import Logging
import SpeakTestSupport
import SpeechModel
import Testing

@testable import EngineWorkers

/// The pool with the real `speakd-engine-worker`: a text that crashed a worker is refused at
/// once, and a worker template that stops answering is reported and replaced.
@Suite("Engine worker pool recovery", .serialized, .timeLimit(.minutes(1)))
struct EngineWorkerPoolRecoveryTests {
    static func makePool(
        workers: Int, templateLimit: Duration = .seconds(2), templateRestartLimit: Duration = .seconds(8)
    ) async throws -> EngineWorkerPool {
        let engine = try await EspeakEngine(voices: nil)
        let launch = EngineWorkerPool.Launch(
            executable: BuiltProduct.path("speakd-engine-worker"), arguments: [], count: workers,
            templateLimit: templateLimit, templateRestartLimit: templateRestartLimit)
        return try await EngineWorkerPool(launch: launch, engine: engine, logger: Logger(label: "test"))
    }

    /// How rendering `text` failed, nil if it did not.
    static func failure(_ pool: EngineWorkerPool, _ text: String) async -> String? {
        do {
            _ = try await EngineWorkerPoolTests.samples(pool.render(Utterance(text)))
            return nil
        } catch {
            return "\(error)"
        }
    }

    static func waitUntil(_ condition: () async -> Bool, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !(await condition()) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("A text that crashed a worker fails again at once with the same error, crashing no other worker")
    func crashedTextIsRefused() async throws {
        let pool = try await Self.makePool(workers: 1)
        defer { pool.shutdown() }
        let crasher = try EngineWorkerPoolTests.crasher("dotted-initials.txt")
        let first = await Self.failure(pool, crasher)
        #expect(first?.hasPrefix("engine worker crashed: SIG") == true, "\(String(describing: first))")
        // The render fails before the pool hears of the death: wait for the replacement.
        try await Self.waitUntil { pool.status.restarts == 1 && pool.status.running == 1 }
        #expect(pool.status.restarts == 1)
        let worker = pool.workerPIDs

        #expect(await Self.failure(pool, crasher) == first)
        #expect(pool.status.restarts == 1)
        #expect(pool.workerPIDs == worker)
        // Another text, even one that crashes too, goes to a worker; a good one renders.
        #expect(await Self.failure(pool, "Gate 4: " + crasher) == first)
        try await Self.waitUntil { pool.status.restarts == 2 && pool.status.running == 1 }
        #expect(pool.status.restarts == 2)
        #expect(await Self.failure(pool, "Gate four.") == nil)
    }

    @Test("A stopped template is the pool's problem after its time limit, and is replaced after its restart limit")
    func stoppedTemplateIsReportedThenReplaced() async throws {
        let pool = try await Self.makePool(
            workers: 1, templateLimit: .milliseconds(500), templateRestartLimit: .milliseconds(1_500))
        defer { pool.shutdown() }
        let template = try #require(await pool.templatePID)
        let worker = try #require(pool.workerPIDs.first)
        #expect(pool.status.problem == nil)
        kill(template, SIGSTOP)
        defer { kill(template, SIGCONT) }
        kill(worker, SIGKILL)
        let killed = ContinuousClock.now
        try await Self.waitUntil({ pool.status.problem != nil }, timeout: .seconds(3))
        let reportedAfter = ContinuousClock.now - killed
        #expect(
            pool.status.problem?.contains("the worker template has not answered") == true,
            "\(String(describing: pool.status.problem))")
        #expect(reportedAfter >= .milliseconds(500) && reportedAfter < .milliseconds(1_500), "\(reportedAfter)")

        // A render waits for the replacement, which a new template forks.
        let samples = try await EngineWorkerPoolTests.samples(pool.render(Utterance("Welcome back.")))
        #expect(samples.count > 22_050 / 4)
        #expect(await pool.templatePID != template)
        try await Self.waitUntil { pool.status.problem == nil }
        #expect(pool.status.problem == nil)
        #expect(pool.status.running == 1)
    }
}
