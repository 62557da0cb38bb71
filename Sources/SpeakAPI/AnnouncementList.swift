/// The body of `GET /v1/announcements`: the speaking announcement first, then the waiting ones in
/// the order they will be spoken.
public struct AnnouncementList: Sendable, Hashable, Codable {
    public var announcements: [AnnouncementStatus]

    public init(announcements: [AnnouncementStatus]) {
        self.announcements = announcements
    }
}
