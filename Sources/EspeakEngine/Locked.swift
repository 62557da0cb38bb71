import Synchronization

/// A value shared between the espeak thread and the engine's callers.
final class Locked<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) { storage = Mutex(value) }

    func set(_ value: Value) { storage.withLock { $0 = value } }

    var value: Value { storage.withLock { $0 } }
}
