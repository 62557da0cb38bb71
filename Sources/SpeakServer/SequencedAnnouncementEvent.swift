import SpeechModel

/// An event with its position in the queue's event history, used as the SSE `id:`.
public struct SequencedAnnouncementEvent: Sendable, Hashable {
    public var sequence: UInt64
    public var event: AnnouncementEvent

    public init(sequence: UInt64, event: AnnouncementEvent) {
        self.sequence = sequence
        self.event = event
    }
}
