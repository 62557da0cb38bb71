import SpeakAPI

/// Whose waiting places an announcement takes in its queue.
///
/// API clients' live announcements (HTTP, MQTT, in process) have the queue's capacity to
/// themselves. A schedule's slots and SSIP clients' messages each have a smaller share of their
/// own beside it, so no number of schedules or SSIP clients can fill the places a live
/// announcement needs; and at equal priority a live announcement goes before them, so none can
/// make it wait behind more than the one speaking (docs/daemon.md, "The queue's shares").
public enum QueueShare: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// An API client's announcement: HTTP, MQTT, or made in process.
    case live
    /// A schedule's slot (origin front `schedule`).
    case scheduled
    /// An SSIP client's message (origin front `ssip`).
    case ssip

    /// The share of an announcement from `origin`: by its front; without one, live.
    public init(origin: AnnouncementOrigin?) {
        switch origin?.front {
        case "schedule": self = .scheduled
        case "ssip": self = .ssip
        default: self = .live
        }
    }

    /// How its places are named to a client that is refused one.
    public var description: String {
        switch self {
        case .live: "live announcements"
        case .scheduled: "scheduled announcements"
        case .ssip: "SSIP messages"
        }
    }
}
