/// Where an announcement is in its life.
public enum AnnouncementState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Accepted and waiting for its turn.
    case queued
    /// Handed to the speaker (possibly stopping after a cancel or interrupt).
    case speaking
    /// The speaking one, paused: still the speaking one for priorities, silent until resumed.
    case paused
    /// Done; its `finished` event has been posted.
    case finished
}
