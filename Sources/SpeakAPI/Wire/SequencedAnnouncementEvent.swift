/// An event with its position in the queue's event history, used as the SSE `id:`.
public struct SequencedAnnouncementEvent: Sendable, Hashable {
    /// Its position in the event history, the SSE `id:`: increases by one with every event the
    /// queue sends, starting at 1.
    public var sequence: UInt64
    /// The event.
    public var event: AnnouncementEvent

    /// - Parameters: see the properties of the same names.
    public init(sequence: UInt64, event: AnnouncementEvent) {
        self.sequence = sequence
        self.event = event
    }
}
