import SpeechModel

/// One announcement as `GET /v1/announcements[/{id}]` reports it.
public struct AnnouncementStatus: Sendable, Hashable, Codable {
    public var id: String
    /// The plain string of the announcement.
    public var text: String
    public var priority: AnnouncementPriority
    public var state: AnnouncementState
    /// 0 while speaking, 1… while waiting; nil once finished.
    public var position: Int?
    /// Set once finished.
    public var success: Bool?
    /// Set once finished.
    public var reason: FinishReason?

    public init(
        id: String, text: String, priority: AnnouncementPriority, state: AnnouncementState,
        position: Int? = nil, success: Bool? = nil, reason: FinishReason? = nil
    ) {
        self.id = id
        self.text = text
        self.priority = priority
        self.state = state
        self.position = position
        self.success = success
        self.reason = reason
    }
}
