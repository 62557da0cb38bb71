import Foundation
import SpeechModel

/// Where an announcement is in its life.
public enum AnnouncementState: String, Sendable, Hashable, Codable {
    /// Accepted, waiting for its turn.
    case waiting
    /// Handed to the speaker (possibly stopping after a cancel or interrupt).
    case speaking
    /// Its `finished` event has been sent.
    case finished
}

/// What `submit(_:)` tells the client: `202 {id, state, position}`.
public struct Submission: Sendable, Hashable {
    public var id: String
    public var state: AnnouncementState
    /// How many announcements will be spoken before it; 0 when it is speaking.
    public var position: Int

    public init(id: String, state: AnnouncementState, position: Int) {
        self.id = id
        self.state = state
        self.position = position
    }
}

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
