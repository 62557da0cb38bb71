import Foundation

/// The timing checks of one attempt of a sink-timed test: figures measured against what a sink
/// played (an event's time against a recording of the sink's monitor, a cancel against the
/// silence that followed it), each held to its bound.
///
/// A miss is noted, not recorded as a test failure: ``retryingSinkTimingOnce(_:_:)`` decides,
/// after the attempt, whether to run it again.
public struct SinkTiming: Sendable {
    /// Each figure that missed its bound, as its message says it.
    public private(set) var misses: [String] = []

    /// Holds a figure to its bound: when `condition` is false, `message` (the figure, its bound
    /// and what was measured) is noted as a miss.
    public mutating func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { misses.append(message()) }
    }
}

/// Runs a sink-timed test's `attempt`, and once more when one of its timing figures missed its
/// bound; returns the misses of the last attempt run, which the test expects to be none.
///
/// A figure measured at a sink is the sum of the code's delay and the machine's: on a loaded
/// machine (a build, another test run, a CPU hog) a scheduler delay of a few milliseconds can
/// push a correct figure over its bound once. The bound is never widened: the whole attempt (its
/// own servers, daemon and recording) runs again, and the second attempt must hold every bound.
/// The retry prints its reason, the figures that missed and the load average, so that a run
/// that needed it says so. Only misses noted in the ``SinkTiming`` are retried: what the test
/// expects of anything else fails the first attempt as it always did.
///
/// - Parameters:
///   - name: the test, as the printed reason names it.
///   - attempt: one whole run of the test: it sets up what it measures, measures it and notes
///     each timing figure with ``SinkTiming/check(_:_:)``.
public func retryingSinkTimingOnce(
    _ name: String,
    _ attempt: (inout SinkTiming) async throws -> Void
) async throws -> [String] {
    var first = SinkTiming()
    try await attempt(&first)
    if first.misses.isEmpty { return [] }
    print(
        "sink timing: \(name): attempt 1 missed \(first.misses.count) bound(s) (load average \(loadAverage())); "
            + "running it once more: \(first.misses.joined(separator: "; "))")
    var second = SinkTiming()
    try await attempt(&second)
    print(
        "sink timing: \(name): attempt 2 "
            + (second.misses.isEmpty ? "held every bound" : "missed \(second.misses.joined(separator: "; "))"))
    return second.misses
}

/// The first three fields of /proc/loadavg (the 1, 5 and 15 minute load averages), or "unknown".
private func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}
