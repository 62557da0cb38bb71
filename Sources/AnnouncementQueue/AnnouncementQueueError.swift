/// Why the queue did not do what it was asked. Only the server maps these to HTTP statuses;
/// the messages are written for the client that made the request.
public struct AnnouncementQueueError: Error, Hashable, CustomStringConvertible {
    private enum Code: Hashable {
        case queueFull
        case shuttingDown
        case invalidValue
        case unknownAnnouncement
        case notSpeaking
        case notPaused
    }

    private let code: Code
    /// A sentence for the client.
    public let message: String
    /// The request field at fault, when one is.
    public let field: String?

    private init(_ code: Code, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    /// The queue is full and holds nothing of lower priority to displace (HTTP 429).
    public static var queueFull: Self { .queueFull(capacity: nil) }

    static func queueFull(capacity: Int?, share: QueueShare = .live) -> Self {
        let limit = capacity.map { " (\($0) waiting)" } ?? ""
        let full = share == .live ? "the queue is full" : "the queue's places for \(share) are full"
        return Self(.queueFull, message: "\(full)\(limit) and nothing of lower priority can be displaced")
    }

    /// The queue is shutting down and takes no more announcements (HTTP 503).
    public static var shuttingDown: Self { Self(.shuttingDown, message: "the service is shutting down") }

    /// A request value is out of range (HTTP 422); `field` names it.
    public static func invalidValue(field: String, message: String) -> Self {
        Self(.invalidValue, message: message, field: field)
    }

    /// No announcement has `id`, or it finished too long ago to be remembered (HTTP 404).
    public static func unknownAnnouncement(_ id: String) -> Self {
        Self(.unknownAnnouncement, message: "no announcement has id '\(id)'", field: "id")
    }

    /// The announcement to pause is not the speaking one, or it is paused or stopping already
    /// (HTTP 409). `field` is nil when the request named no announcement.
    public static func notSpeaking(_ message: String, field: String? = "id") -> Self {
        Self(.notSpeaking, message: message, field: field)
    }

    /// The announcement to resume is not paused (HTTP 409). `field` is nil when the request
    /// named no announcement.
    public static func notPaused(_ message: String, field: String? = "id") -> Self {
        Self(.notPaused, message: message, field: field)
    }

    /// Same kind of error; the message and field are not compared.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// True when `self` is `queueFull`.
    public var isQueueFull: Bool { code == .queueFull }
    /// True when `self` is `shuttingDown`.
    public var isShuttingDown: Bool { code == .shuttingDown }
    /// True when `self` is `invalidValue`, whatever the field.
    public var isInvalidValue: Bool { code == .invalidValue }
    /// True when `self` is `unknownAnnouncement`, whatever the id.
    public var isUnknownAnnouncement: Bool { code == .unknownAnnouncement }
    /// True when `self` is `notSpeaking`.
    public var isNotSpeaking: Bool { code == .notSpeaking }
    /// True when `self` is `notPaused`.
    public var isNotPaused: Bool { code == .notPaused }

    public var description: String { message }
}
