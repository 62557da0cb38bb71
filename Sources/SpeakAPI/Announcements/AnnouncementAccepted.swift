/// What the queue answers when it accepts an announcement; the body of an accepted
/// `POST /v1/announcements` (status 202).
public struct AnnouncementAccepted: Sendable, Hashable, Codable {
    /// The id every later event and request uses.
    public var id: String
    /// `speaking` when it started at once, otherwise `queued`.
    public var state: AnnouncementState
    /// 0 while speaking; otherwise how many announcements will be spoken before it (1 = next).
    public var position: Int
    /// A private announcement's capability: `GET /v1/announcements/{id}` with the header
    /// `Speak-Announcement-Key: KEY` shows its text to its poster, and to nobody else. Nil otherwise.
    public var key: String?
    /// Set on a repeat: the id of the announcement it repeats.
    public var repeatOf: String?

    /// - Parameters: see the properties of the same names.
    public init(id: String, state: AnnouncementState, position: Int) {
        self.id = id
        self.state = state
        self.position = position
    }
}
