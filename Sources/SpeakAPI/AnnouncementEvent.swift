import Foundation
import SpeechModel

/// How urgently an announcement wants to be heard.
public enum AnnouncementPriority: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case low
    case `default`
    case high

    private var rank: Int {
        switch self {
        case .low: 0
        case .default: 1
        case .high: 2
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// Why an announcement finished.
public enum FinishReason: String, Sendable, Hashable, Codable, CaseIterable {
    /// All of its audio was played out by the sink.
    case completed
    /// A more urgent announcement took over while it was speaking.
    case interrupted
    /// Cancelled by a client.
    case cancelled
    /// `expiresAfter` passed before it started.
    case expired
    /// Displaced from a full queue by a more urgent announcement.
    case discarded
    /// The engine or the audio sink failed.
    case failed
    /// The service shut down.
    case shutdown
}

/// Something that happened to an announcement: `queued`, `started`, `paused`, `resumed`, `finished`.
public struct AnnouncementEvent: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case queued
        case started
        /// The speaking announcement fell silent on a pause request.
        case paused
        /// A paused announcement continues from where it stopped.
        case resumed
        case finished

        /// Apple's name (`AVSpeechSynthesizerDelegate`) for `paused`.
        public static var didPause: Self { .paused }
        /// Apple's name for `resumed`.
        public static var didContinue: Self { .resumed }
    }

    public var type: Kind
    public var id: String
    /// The plain string of the announcement.
    public var text: String
    public var priority: AnnouncementPriority
    public var timestamp: Date
    /// Set on `finished` only: true when all of its audio was played out.
    public var success: Bool?
    /// Set on `finished` only.
    public var reason: FinishReason?
    /// The voice actually used, when known.
    public var voice: String?
    /// A human-readable detail, e.g. why an announcement failed.
    public var detail: String?
    /// The named output whose queue holds the announcement (`default` unless the request named another).
    public var output: String?

    public init(
        type: Kind, id: String, text: String, priority: AnnouncementPriority, timestamp: Date,
        success: Bool? = nil, reason: FinishReason? = nil, voice: String? = nil, detail: String? = nil,
        output: String? = nil
    ) {
        self.type = type
        self.id = id
        self.text = text
        self.priority = priority
        self.timestamp = timestamp
        self.success = success
        self.reason = reason
        self.voice = voice
        self.detail = detail
        self.output = output
    }
}

extension AnnouncementEvent {
    private enum CodingKeys: String, CodingKey {
        case type, id, text, priority, timestamp, success, reason, voice, detail, output
    }

    /// The wire form of `timestamp`: ISO 8601 in UTC with milliseconds (`2026-11-21T11:34:10.123Z`).
    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Writes the timestamp as ISO 8601 with milliseconds whatever the encoder's date strategy,
    /// so every process that writes events (the daemon, the CLI speaking in-process) writes the
    /// same format and event timings can be compared across them.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(id, forKey: .id)
        try container.encode(text, forKey: .text)
        try container.encode(priority, forKey: .priority)
        try container.encode(timestamp.formatted(Self.timestampStyle), forKey: .timestamp)
        try container.encodeIfPresent(success, forKey: .success)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(voice, forKey: .voice)
        try container.encodeIfPresent(detail, forKey: .detail)
        try container.encodeIfPresent(output, forKey: .output)
    }

    /// Reads an ISO 8601 timestamp with or without fractional seconds.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let timestamp = try container.decode(String.self, forKey: .timestamp)
        guard
            let date = (try? Self.timestampStyle.parse(timestamp)) ?? (try? Date.ISO8601FormatStyle().parse(timestamp))
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .timestamp, in: container, debugDescription: "'\(timestamp)' is not an ISO 8601 timestamp")
        }
        self.init(
            type: try container.decode(Kind.self, forKey: .type),
            id: try container.decode(String.self, forKey: .id),
            text: try container.decode(String.self, forKey: .text),
            priority: try container.decode(AnnouncementPriority.self, forKey: .priority),
            timestamp: date,
            success: try container.decodeIfPresent(Bool.self, forKey: .success),
            reason: try container.decodeIfPresent(FinishReason.self, forKey: .reason),
            voice: try container.decodeIfPresent(String.self, forKey: .voice),
            detail: try container.decodeIfPresent(String.self, forKey: .detail),
            output: try container.decodeIfPresent(String.self, forKey: .output))
    }
}
