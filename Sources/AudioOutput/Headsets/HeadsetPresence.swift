import Synchronization

/// Whether headphones are plugged into one output's device, as its sound server reports it.
///
/// `present` is nil while nothing is known: a null sink, a sink without ports, ALSA, a server
/// not reached yet. Who cares reads `present` (the speaker, which fails a private announcement at
/// once while the headphones are known to be out) or iterates `changes()` (the `headset` events,
/// a session that moves to the headset when it is plugged in).
public final class HeadsetPresence: Sendable {
    /// One port of a sink, as the sound server describes it.
    public struct Port: Sendable, Hashable {
        /// Whether something is plugged into the port's jack: the server's jack detection.
        public enum Availability: Sendable, Hashable {
            case unknown, no, yes
        }

        public var name: String
        /// A headphones or headset port (by the server's port type, or by its name when the
        /// server gives no type).
        public var isHeadphones: Bool
        public var availability: Availability
    }

    private struct State {
        var present: Bool?
        var watchers: [UInt64: AsyncStream<Bool?>.Continuation] = [:]
        var nextWatcher: UInt64 = 0
    }

    /// The output it belongs to.
    public let output: String
    private let state: Mutex<State>

    /// - Parameters:
    ///   - output: the output it belongs to.
    ///   - present: what is known at first; nil for nothing.
    public init(output: String, present: Bool? = nil) {
        self.output = output
        self.state = Mutex(State(present: present))
    }

    /// True while headphones are plugged in, false while they are known to be out, nil when unknown.
    public var present: Bool? { state.withLock { $0.present } }

    /// Sets what the sound server reports; watchers hear of changes only.
    public func update(_ present: Bool?) {
        state.withLock { state in
            guard state.present != present else { return }
            state.present = present
            // Under the lock, so every watcher sees the changes in the order they happened.
            for watcher in state.watchers.values { watcher.yield(present) }
        }
    }

    /// The value now, then every change, until `finish()`.
    public func changes() -> AsyncStream<Bool?> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool?.self, bufferingPolicy: .bufferingNewest(16))
        let id = state.withLock { state in
            let id = state.nextWatcher
            state.nextWatcher += 1
            state.watchers[id] = continuation
            continuation.yield(state.present)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every `changes()` stream (the daemon is shutting down).
    public func finish() {
        // Outside the lock: finishing runs `onTermination`, which takes it.
        let watchers = state.withLock { state in
            defer { state.watchers = [:] }
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.finish() }
    }

    /// Whether headphones are plugged in, from a sink's ports.
    ///
    /// The headphone ports decide when the sink has any: present when one of them is available,
    /// absent when all of them are known to be unavailable. A laptop-style sink whose speaker
    /// port takes over when the headphones are pulled is then "absent", not "present on the
    /// speaker", which is the case that matters: a private announcement would be heard in the
    /// room. A sink without headphone ports goes by its active port. Ports without jack
    /// detection say nothing: nil.
    ///
    /// - Parameters:
    ///   - ports: the sink's ports.
    ///   - active: the name of its active port.
    public static func presence(ports: [Port], active: String?) -> Bool? {
        let headphones = ports.filter(\.isHeadphones)
        if !headphones.isEmpty {
            if headphones.contains(where: { $0.availability == .yes }) { return true }
            if headphones.allSatisfy({ $0.availability == .no }) { return false }
            return nil
        }
        switch ports.first(where: { $0.name == active })?.availability {
        case .yes: return true
        case .no: return false
        case .unknown, nil: return nil
        }
    }
}
