/// Where an announcement is in its life.
public enum AnnouncementState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Accepted and waiting for its turn.
    case queued
    /// Being spoken now.
    case speaking
    /// Done; its `finished` event has been posted.
    case finished
}
