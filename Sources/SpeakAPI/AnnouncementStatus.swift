import Foundation
import SpeechModel

/// Where an announcement is in its life.
public enum AnnouncementState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Accepted and waiting for its turn.
    case queued
    /// Being spoken now.
    case speaking
    /// Done; its `finished` event has been posted.
    case finished
}

/// The answer to an accepted `POST /v1/announcements` (status 202).
public struct AnnouncementAccepted: Sendable, Hashable, Codable {
    /// The id every later event and request uses.
    public var id: String
    /// `speaking` when it started at once, otherwise `queued`.
    public var state: AnnouncementState
    /// 0 while speaking; otherwise how many announcements will be spoken before it (1 = next).
    public var position: Int

    public init(id: String, state: AnnouncementState, position: Int) {
        self.id = id
        self.state = state
        self.position = position
    }
}

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

/// The body of `GET /v1/announcements`: the speaking announcement first, then the waiting ones in
/// the order they will be spoken.
public struct AnnouncementList: Sendable, Hashable, Codable {
    public var announcements: [AnnouncementStatus]

    public init(announcements: [AnnouncementStatus]) {
        self.announcements = announcements
    }
}

/// The body of `DELETE /v1/announcements[/{id}]`: how many announcements this request cancelled.
///
/// An announcement that had already finished (or was already stopping) is not counted.
public struct CancelResult: Sendable, Hashable, Codable {
    public var cancelled: Int

    public init(cancelled: Int) {
        self.cancelled = cancelled
    }
}

/// The body of `GET /v1/voices`.
public struct VoiceList: Sendable, Hashable, Codable {
    public var voices: [VoiceInfo]

    public init(voices: [VoiceInfo]) {
        self.voices = voices
    }
}
