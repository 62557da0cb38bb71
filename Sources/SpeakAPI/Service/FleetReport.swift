import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// What a kiosk publishes about an announcement it got over MQTT: to
/// `speakd/{site}/device/{id}/events` (every event of every announcement), and the outcome
/// (`finished` or `refused`) also to the message's MQTT 5 response topic with its correlation data.
///
/// `{"type": "finished", "device": "hall-1", "site": "museum", "requestId": "r-17", "event": {…}}`
/// or `{"type": "refused", "device": "hall-1", …, "error": {"code", "message", "field"}}`, the
/// error as `POST /v1/announcements` would have answered it.
public struct FleetReport: Sendable, Hashable, Codable {
    /// `queued`, `started`, `finished` (the announcement's events), or `refused`: never queued.
    public enum Kind: String, Sendable, Hashable, Codable {
        case queued
        case started
        case finished
        case refused
        /// Headphones plugged into or pulled out of a private output (`event.present`).
        case headset
        /// An output's session started, changed or ended (`event.session`); also the answer to
        /// a session command on `speakd/{site}/device/{id}/session`.
        case session
        /// A repeat was queued (`event.repeatOf` names the original).
        case `repeat`
        /// A schedule was created, changed or deleted, or one of its slots came (`event.schedule`).
        case schedule
    }

    public var type: Kind
    /// The kiosk's device id (`--mqtt-id`).
    public var device: String
    /// The kiosk's site (`--mqtt-site`).
    public var site: String
    /// The request's `requestId`, or its correlation data as hex when it had none.
    public var requestId: String?
    /// The announcement's event, for every type but `refused`.
    public var event: AnnouncementEvent?
    /// Why it was refused, for `refused`.
    public var error: ErrorResponse.Detail?
    /// The answer to a session command: what changed.
    public var session: SessionChange?

    /// - Parameters: see the properties of the same names.
    public init(
        type: Kind, device: String, site: String, requestId: String? = nil, event: AnnouncementEvent? = nil,
        error: ErrorResponse.Detail? = nil
    ) {
        self.type = type
        self.device = device
        self.site = site
        self.requestId = requestId
        self.event = event
        self.error = error
    }
}

/// The retained `speakd/{site}/device/{id}/status` of a kiosk; `offline` is its last will.
public struct FleetStatus: Sendable, Hashable, Codable {
    /// Whether the kiosk is connected.
    public enum State: String, Sendable, Hashable, Codable {
        case online
        case offline
    }

    /// The queue as `/healthz` shows it.
    public typealias Queue = HealthReport.Queue

    public var state: State
    public var device: String
    public var site: String
    /// The groups it listens to (`--mqtt-groups`).
    public var groups: [String]?
    /// The languages its voices speak (BCP 47), when online.
    public var voices: [String]?
    /// Its audio outputs as `NAME=SINK` (`default=pulse`, `headset=pulse:usb`), when online.
    public var outputs: [String]?
    /// Whether its audio output works, when online.
    public var audio: HealthReport.State?
    /// Its queue, when online.
    public var queue: Queue?

    /// - Parameters: see the properties of the same names.
    public init(
        state: State, device: String, site: String, groups: [String]? = nil, voices: [String]? = nil,
        outputs: [String]? = nil, audio: HealthReport.State? = nil, queue: Queue? = nil
    ) {
        self.state = state
        self.device = device
        self.site = site
        self.groups = groups
        self.voices = voices
        self.outputs = outputs
        self.audio = audio
        self.queue = queue
    }
}

/// The topics of a site: `speakd/{site}/…`.
public struct FleetTopics: Sendable, Hashable {
    public var site: String

    /// - Parameter site: the site, one topic level.
    public init(site: String) {
        self.site = site
    }

    /// Every kiosk of the site.
    public var all: String { "speakd/\(site)/all/announce" }
    /// The kiosks of one group.
    public func group(_ group: String) -> String { "speakd/\(site)/group/\(group)/announce" }
    /// One kiosk.
    public func device(_ device: String) -> String { "speakd/\(site)/device/\(device)/announce" }
    /// A kiosk's events.
    public func events(_ device: String) -> String { "speakd/\(site)/device/\(device)/events" }
    /// One kiosk's session commands: a `PUT /v1/session` body starts or changes a session.
    public func session(_ device: String) -> String { "speakd/\(site)/device/\(device)/session" }
    /// One kiosk's session end commands: `{"output": NAME}` or `{"id": ID}` (or `{}`, the
    /// default output's) ends that session.
    public func sessionEnd(_ device: String) -> String { "speakd/\(site)/device/\(device)/session/end" }
    /// A kiosk's retained status.
    public func status(_ device: String) -> String { "speakd/\(site)/device/\(device)/status" }
    /// Schedule commands to every kiosk of the site: `{"action": "add", "schedule": {…}}` (a
    /// `POST /v1/schedules` body, best with an `id` so that every kiosk knows it by one),
    /// `{"action": "update", "id": ID, "patch": {…}}` or `{"action": "delete", "id": ID}`.
    public var allSchedules: String { "speakd/\(site)/all/schedule" }
    /// Schedule commands to the kiosks of one group.
    public func groupSchedules(_ group: String) -> String { "speakd/\(site)/group/\(group)/schedule" }
    /// Schedule commands to one kiosk.
    public func deviceSchedules(_ device: String) -> String { "speakd/\(site)/device/\(device)/schedule" }

    /// Checks one topic level given by a user (a site, group or device id): not empty, no `/`,
    /// no wildcard, no NUL; returns why not, or nil when it is fine.
    public static func problem(with level: String) -> String? {
        if level.isEmpty { return "it is empty" }
        if level.utf8.count > 200 { return "it is longer than 200 bytes" }
        if let bad = level.first(where: { "/+#\u{0}".contains($0) }) {
            return "it contains '\(bad == "\u{0}" ? "NUL" : String(bad))', which MQTT topics reserve"
        }
        return nil
    }
}
