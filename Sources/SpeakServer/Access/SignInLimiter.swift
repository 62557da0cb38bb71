import FoundationEssentials
import Synchronization

/// The failed sign-ins (`POST /v1/login` with a wrong token) of each client address, so that a
/// token cannot be guessed at the speed of the network: after `maxFailures` failures within
/// `window`, that address's sign-ins are refused (429 `tooManySignIns`, `Retry-After` the
/// seconds until the oldest of them is out of the window) without the token being checked.
/// A sign-in that succeeds clears its address's failures. At most `maxAddresses` addresses are
/// remembered; past that the one whose last failure is oldest is forgotten. Kept in memory: a
/// restart forgets them, as it ends the sessions.
final class SignInLimiter: Sendable {
    /// Failures allowed within `window` before sign-ins from that address are refused.
    let maxFailures: Int
    /// How long a failure counts.
    let window: Duration
    /// The most client addresses remembered at once.
    let maxAddresses: Int
    private let now: @Sendable () -> Date
    private let failures = Mutex<[String: [Date]]>([:])

    /// - Parameters:
    ///   - maxFailures: failures allowed within `window` (5 by default).
    ///   - window: how long a failure counts (a minute by default).
    ///   - maxAddresses: the most addresses remembered.
    ///   - now: the wall clock; tests pass one they move.
    init(
        maxFailures: Int = 5, window: Duration = .seconds(60), maxAddresses: Int = 4_096,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.maxFailures = max(1, maxFailures)
        self.window = window
        self.maxAddresses = max(1, maxAddresses)
        self.now = now
    }

    private var windowSeconds: Double { Double(window.components.seconds) }

    /// The whole seconds `address` must wait before it may try again, or nil when it may now.
    func wait(for address: String) -> Int? {
        let at = now()
        return failures.withLock { failures in
            let recent = (failures[address] ?? []).filter { at.timeIntervalSince($0) < windowSeconds }
            failures[address] = recent.isEmpty ? nil : recent
            guard recent.count >= maxFailures, let oldest = recent.first else { return nil }
            return max(1, Int((windowSeconds - at.timeIntervalSince(oldest)).rounded(.up)))
        }
    }

    /// Counts a failed sign-in of `address`.
    func fail(_ address: String) {
        let at = now()
        failures.withLock { failures in
            if failures[address] == nil, failures.count >= maxAddresses {
                failures = failures.filter { at.timeIntervalSince($0.value.last ?? at) < windowSeconds }
                while failures.count >= maxAddresses,
                    let oldest = failures.min(by: { ($0.value.last ?? at) < ($1.value.last ?? at) })
                {
                    failures[oldest.key] = nil
                }
            }
            var recent = (failures[address] ?? []).filter { at.timeIntervalSince($0) < windowSeconds }
            recent.append(at)
            failures[address] = Array(recent.suffix(maxFailures))
        }
    }

    /// Clears the failures of `address`, which has just signed in.
    func succeed(_ address: String) {
        _ = failures.withLock { $0.removeValue(forKey: address) }
    }
}
