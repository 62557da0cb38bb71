/// The body of `GET /v1/announcements`: the speaking announcement first, then the waiting ones in
/// the order they will be spoken.
public struct AnnouncementList: Sendable, Hashable, Codable {
    /// Speaking first, then waiting in speaking order.
    public var announcements: [AnnouncementStatus]

    /// - Parameter announcements: speaking first, then waiting in speaking order.
    public init(announcements: [AnnouncementStatus]) {
        self.announcements = announcements
    }
}
