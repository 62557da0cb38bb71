import PosixSupport
import Testing

/// `ReleasingClock` sleeps as the continuous clock does, and a cancelled sleep ends at once.
///
/// The upper bounds catch a sleep far longer than asked (a wrong unit: a thousand times longer)
/// or a cancellation that does not end it, not scheduling delays: the unit tier runs suites side
/// by side, and while other suites hold this process's cooperative threads, a task whose sleep
/// has ended can wait seconds to run again (5 s was seen).
@Suite("Releasing clock")
struct ReleasingClockTests {
    let clock = ReleasingClock()
    /// Far less than a thousand times the 50 ms sleep, and than an hour.
    static let late = Duration.seconds(30)

    @Test("A sleep returns at its deadline, not before")
    func sleepsUntilTheDeadline() async throws {
        let start = ContinuousClock.now
        try await clock.sleep(for: .milliseconds(50))
        let slept = start.duration(to: .now)
        #expect(slept >= .milliseconds(50) && slept < Self.late, "slept \(slept)")
    }

    @Test("A sleep whose deadline has passed returns at once")
    func aPastDeadlineReturnsAtOnce() async throws {
        let start = ContinuousClock.now
        try await clock.sleep(until: start.advanced(by: .seconds(-1)), tolerance: nil)
        #expect(start.duration(to: .now) < .seconds(1))
    }

    @Test("A sleep of an hour that is cancelled throws CancellationError at once")
    func aCancelledSleepEndsAtOnce() async throws {
        let start = ContinuousClock.now
        let sleeper = Task { try await clock.sleep(for: .seconds(3600)) }
        try await Task.sleep(for: .milliseconds(20))
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(start.duration(to: .now) < Self.late)
    }

    /// Starts sleeps on itself, so a sleep cancelled before the method returns is cancelled
    /// before its task has started.
    actor Starter {
        func sleepCancelledBeforeItStarts(_ clock: ReleasingClock) -> Task<Void, any Error> {
            let sleeper = Task { try await clock.sleep(for: .seconds(3600)) }
            sleeper.cancel()
            return sleeper
        }
    }

    @Test("10,000 sleeps cancelled at any point, before they start too, all end with CancellationError")
    func cancelledAtAnyPoint() async throws {
        let starter = Starter()
        let cancelled = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<10_000 {
                let sleeper: Task<Void, any Error>
                if index % 2 == 0 {
                    sleeper = await starter.sleepCancelledBeforeItStarts(clock)
                } else {
                    sleeper = Task { try await clock.sleep(for: .seconds(3600)) }
                    await Task.yield()
                    sleeper.cancel()
                }
                group.addTask {
                    do {
                        try await sleeper.value
                        return false
                    } catch is CancellationError {
                        return true
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(cancelled == 10_000)
    }
}
