import SpeakTestSupport
import Testing

/// `retryingSinkTimingOnce`, the retry every sink-timed test shares: a second attempt only when a
/// timing figure missed, never a third, and the second attempt's misses are the test's.
@Suite struct SinkTimingRetryTests {
    /// The attempts made and the misses returned, for attempts that miss as `misses` says, by
    /// attempt number.
    func run(missing misses: [Int: [String]]) async throws -> (attempts: Int, misses: [String]) {
        var attempts = 0
        let returned = try await retryingSinkTimingOnce("SinkTimingRetryTests") { timing in
            attempts += 1
            timing.check(true, "never noted")
            for miss in misses[attempts] ?? [] { timing.check(false, miss) }
        }
        return (attempts, returned)
    }

    @Test func anAttemptThatHoldsEveryBoundRunsOnce() async throws {
        let result = try await run(missing: [:])
        #expect(result.attempts == 1 && result.misses.isEmpty, "\(result)")
    }

    @Test func aMissIsRunOnceMoreAndPassesWhenTheSecondHolds() async throws {
        let result = try await run(missing: [1: ["start 22.9 ms, not under 20 ms"]])
        #expect(result.attempts == 2 && result.misses.isEmpty, "\(result)")
    }

    @Test func theSecondAttemptsMissesAreReturnedAndThereIsNoThird() async throws {
        let result = try await run(missing: [1: ["first"], 2: ["second a", "second b"], 3: ["third"]])
        #expect(result.attempts == 2, "\(result)")
        #expect(result.misses == ["second a", "second b"])
    }

    @Test func anErrorInTheFirstAttemptIsNotRetried() async throws {
        struct Failed: Error {}
        var attempts = 0
        await #expect(throws: Failed.self) {
            _ = try await retryingSinkTimingOnce("SinkTimingRetryTests") { _ in
                attempts += 1
                throw Failed()
            }
        }
        #expect(attempts == 1)
    }
}
