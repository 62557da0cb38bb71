import SpeakAPI

/// What the service counts, for `/metrics`: accepted and refused announcements, whatever front
/// brought them. The HTTP front's metrics supply it (`SpeakMetrics.serviceCounters`).
public struct ServiceCounters: Sendable {
    /// One announcement accepted, at its priority.
    public var accepted: @Sendable (AnnouncementPriority) -> Void
    /// One refused before it was accepted, with `SpeakError.refusalReason`.
    public var refused: @Sendable (String) -> Void

    /// - Parameters: see the properties of the same names.
    public init(
        accepted: @escaping @Sendable (AnnouncementPriority) -> Void,
        refused: @escaping @Sendable (String) -> Void
    ) {
        self.accepted = accepted
        self.refused = refused
    }

    /// Counts nothing.
    public static let none = ServiceCounters(accepted: { _ in }, refused: { _ in })
}
