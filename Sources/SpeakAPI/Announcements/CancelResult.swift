/// The body of `DELETE /v1/announcements[/{id}]`: how many announcements this request cancelled.
///
/// An announcement that had already finished (or was already stopping) is not counted.
public struct CancelResult: Sendable, Hashable, Codable {
    /// How many announcements this request cancelled.
    public var cancelled: Int

    /// - Parameter cancelled: how many announcements were cancelled.
    public init(cancelled: Int) {
        self.cancelled = cancelled
    }
}
