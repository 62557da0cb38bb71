import NIOCore
import Synchronization

/// A listener's open connections, at most `limit`: one more is closed at once, and the open ones
/// are never evicted for it.
public final class OpenConnections<Value: Sendable>: Sendable {
    /// The most open connections.
    public let limit: Int
    private let open = Mutex<[ObjectIdentifier: Value]>([:])

    /// - Parameter limit: the most open connections.
    public init(limit: Int) {
        self.limit = limit
    }

    /// Keeps `value` for `connection` until `remove`; at the limit, calls `refused` (to log it)
    /// and closes the connection instead.
    /// - Returns: whether the connection was admitted.
    public func admit(_ connection: StreamListener.Connection, _ value: Value, refused: () -> Void) async -> Bool {
        let admitted = open.withLock { open in
            guard open.count < limit else { return false }
            open[ObjectIdentifier(connection.channel)] = value
            return true
        }
        if !admitted {
            refused()
            try? await connection.channel.close()
        }
        return admitted
    }

    /// Forgets `connection`.
    public func remove(_ connection: StreamListener.Connection) {
        _ = open.withLock { $0.removeValue(forKey: ObjectIdentifier(connection.channel)) }
    }

    /// What is kept for each open connection.
    public var values: [Value] { open.withLock { Array($0.values) } }

    /// Whether none is open.
    public var isEmpty: Bool { open.withLock { $0.isEmpty } }
}
