import SpeechModel

/// One announcement as the queue reports it, and as `GET /v1/announcements[/{id}]` sends it.
public struct AnnouncementStatus: Sendable, Hashable, Codable {
    /// The id `POST /v1/announcements` returned.
    public var id: String
    /// The plain string of the announcement.
    public var text: String
    /// How urgently it wants to be heard.
    public var priority: AnnouncementPriority
    /// Waiting, speaking or finished.
    public var state: AnnouncementState
    /// 0 while speaking; while waiting, how many announcements will be spoken before it; nil once finished.
    public var position: Int?
    /// Set once finished.
    public var success: Bool?
    /// Set once finished.
    public var reason: FinishReason?
    /// The named output whose queue holds it (`default` unless the request named another).
    public var output: String?
    /// True for a private announcement (`"private": true`): its `text` is empty unless the
    /// request carries the announcement's `key`.
    public var `private`: Bool?

    /// - Parameters: see the properties of the same names.
    public init(
        id: String, text: String, priority: AnnouncementPriority, state: AnnouncementState,
        position: Int? = nil, success: Bool? = nil, reason: FinishReason? = nil, output: String? = nil,
        `private`: Bool? = nil
    ) {
        self.id = id
        self.text = text
        self.priority = priority
        self.state = state
        self.position = position
        self.success = success
        self.reason = reason
        self.output = output
        self.private = `private`
    }
}
