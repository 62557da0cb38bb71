import Foundation
import SpeechModel

/// One announcement as the queue sees it now.
public struct AnnouncementStatus: Sendable, Hashable {
    public var id: String
    /// The plain string.
    public var text: String
    public var priority: AnnouncementPriority
    public var queue: Bool
    public var state: AnnouncementState
    /// How many announcements will be spoken before it; nil once finished.
    public var position: Int?
    public var queuedAt: Date
    public var startedAt: Date?
    /// When it expires if it has not started by then.
    public var expiresAt: Date?
    /// Its `finished` event, once it has finished.
    public var finished: AnnouncementEvent?

    public init(
        id: String, text: String, priority: AnnouncementPriority, queue: Bool, state: AnnouncementState,
        position: Int?, queuedAt: Date, startedAt: Date? = nil, expiresAt: Date? = nil,
        finished: AnnouncementEvent? = nil
    ) {
        self.id = id
        self.text = text
        self.priority = priority
        self.queue = queue
        self.state = state
        self.position = position
        self.queuedAt = queuedAt
        self.startedAt = startedAt
        self.expiresAt = expiresAt
        self.finished = finished
    }
}
