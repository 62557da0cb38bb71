import Testing
import WorkerRuntime

/// The restart backoff of one worker slot: deaths under a job never delay a replacement; failed
/// starts do, doubling to a cap.
@Suite("Restart backoff")
struct RestartBackoffTests {
    @Test("Workers that die under a job are replaced at once, however many die in a row")
    func deathsUnderAJobNeverWait() {
        var slot = RestartBackoff()
        for _ in 0..<100 {
            slot.workerDied(afterTakingAJob: true)
            #expect(slot.delay == .zero)
        }
    }

    @Test("Failed starts wait 0.1 s doubling to 5 s; one death before a job does not wait")
    func failedStartsBackOff() {
        var slot = RestartBackoff()
        slot.workerDied(afterTakingAJob: false)
        #expect(slot.delay == .zero)
        var delays: [Duration] = []
        for _ in 0..<9 {
            slot.startFailed()
            delays.append(slot.delay)
        }
        #expect(
            delays == [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000].map { Duration.milliseconds($0) })
    }

    @Test("A worker that took a job ends its slot's backoff; one that died idle continues it")
    func aJobResetsTheSlot() {
        var slot = RestartBackoff()
        for _ in 0..<4 { slot.startFailed() }
        #expect(slot.delay == .milliseconds(400))
        slot.workerDied(afterTakingAJob: false)
        #expect(slot.delay == .milliseconds(800))
        slot.workerDied(afterTakingAJob: true)
        #expect(slot.delay == .zero)
        slot.startFailed()
        #expect(slot.delay == .zero)
        slot.startFailed()
        #expect(slot.delay == .milliseconds(100))
    }
}
