import EngineWorkers
import Foundation
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

/// Deaths at awkward moments, made deterministic by holding Swift's cooperative threads while a
/// worker dies: the pool's own reader threads are not on that pool, so what they do happens
/// while no task can run.
@Suite("Engine worker pool races", .serialized, .timeLimit(.minutes(2)))
struct EngineWorkerPoolRaceTests {
    /// Keeps every cooperative thread busy until released. The threads spin rather than sleep:
    /// a sleeping pool thread can be replaced by libdispatch, a running one is not.
    final class CooperativePoolHold: Sendable {
        private let held = Atomic<Bool>(true)
        private let spinning = Atomic<Int>(0)
        let width = ProcessInfo.processInfo.activeProcessorCount

        init() {
            for _ in 0..<width {
                Task.detached { [self] in
                    spinning.add(1, ordering: .sequentiallyConsistent)
                    while held.load(ordering: .sequentiallyConsistent) {}
                }
            }
        }

        /// Whether every cooperative thread is held now.
        var isHolding: Bool { spinning.load(ordering: .sequentiallyConsistent) == width }

        func release() { held.store(false, ordering: .sequentiallyConsistent) }
    }

    /// What the controlling thread did, for the test to check once it is done.
    final class Controller: Sendable {
        private let state = Mutex<(notes: [String], finished: Bool)>(([], false))
        func note(_ note: String) { state.withLock { $0.notes.append(note) } }
        func finish() { state.withLock { $0.finished = true } }
        var notes: [String] { state.withLock { $0.notes } }
        var isFinished: Bool { state.withLock { $0.finished } }
    }

    /// Waits on this (non-cooperative) thread until `condition` has held for `steady`.
    static func block(until condition: () -> Bool, steady: Duration, timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var since: ContinuousClock.Instant?
        while ContinuousClock.now < deadline {
            if condition() {
                let start = since ?? .now
                since = start
                if ContinuousClock.now - start >= steady { return true }
            } else {
                since = nil
            }
            usleep(5_000)
        }
        return false
    }

    @Test("A worker that dies after it was handed to a waiting render, before the job was sent, still ends that render")
    func deathBetweenHandOverAndStart() async throws {
        // Nobody reads A until the end: its render may run ahead of its listener without bound.
        let pool = try await EngineWorkerPoolTests.makePool(workers: 1, maxSamplesAhead: .max)
        defer { pool.shutdown() }
        let worker = try #require(pool.workerPIDs.first)
        // A holds the one worker long enough for B to queue behind it: espeak-ng renders about
        // 15,000 characters a second here, so A is given over a second's worth.
        let first = pool.render(
            Utterance(String(repeating: "The next train to Porto leaves from platform four. ", count: 400)))
        try await Task.sleep(for: .milliseconds(50))
        let second = pool.render(Utterance("Doors closing."))
        try await Task.sleep(for: .milliseconds(50))
        // Seen running at some moment of the next second (at one instant it may be in a write).
        #expect(
            Self.block(until: { ProcessTable.isRunning(worker) }, steady: .zero, timeout: .seconds(1)),
            "the first render ended before the second queued for the worker")

        // With no task able to run, the worker finishes A (its reader hands it to B's waiting
        // task, which cannot run yet) and is killed; its reader reports the death. Only then may
        // B's task send its job.
        let hold = CooperativePoolHold()
        let controller = Controller()
        let thread = Thread {
            defer { controller.finish() }
            guard Self.block(until: { hold.isHolding }, steady: .zero, timeout: .seconds(10)) else {
                controller.note("the cooperative pool was not held")
                hold.release()
                return
            }
            // Idle: asleep in its read for 200 ms in a row, A's `done` sent.
            let idle = Self.block(
                until: { !ProcessTable.isRunning(worker) }, steady: .milliseconds(200), timeout: .seconds(20))
            controller.note(idle ? "worker idle" : "worker never idle")
            kill(worker, SIGKILL)
            // Reaped (`kill(pid, 0)` fails), then a moment for the reader to report it.
            _ = Self.block(until: { kill(worker, 0) != 0 }, steady: .milliseconds(200), timeout: .seconds(5))
            controller.note("worker killed and reaped")
            hold.release()
        }
        thread.start()
        while !controller.isFinished { try await Task.sleep(for: .milliseconds(10)) }
        #expect(controller.notes == ["worker idle", "worker killed and reaped"])

        let firstSamples = try await EngineWorkerPoolTests.samples(first)
        #expect(firstSamples.count > 22_050)
        // B must end: rendered by the replacement, or failed with the death. It must not hang.
        let ended = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    let samples = try await EngineWorkerPoolTests.samples(second)
                    return "rendered \(samples.count) samples"
                } catch {
                    return "failed: \(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        // The pool hands the dead worker to B's task (`release` from the reader thread) and the
        // reader then reports the death with no job: `start` must refuse the dead worker and B
        // must go to the replacement, rendered in full, not hang and not fail.
        #expect(
            ended?.hasPrefix("rendered") == true,
            "the second render: \(ended ?? "neither rendered nor failed within 5 s")")
    }
}
