/// Why the queue did not do what a request asked.
public struct SchedulingError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case queueFull
        case shuttingDown
        case unknownAnnouncement
        case invalidValue
    }

    private let code: Code
    /// A sentence for the client.
    public let message: String
    /// The request field at fault, for `invalidValue`.
    public let field: String?

    private init(_ code: Code, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    /// A request value the queue itself rejects (`expiresAfter`).
    public static func invalidValue(field: String?, _ message: String) -> SchedulingError {
        SchedulingError(.invalidValue, message, field: field)
    }

    /// The queue is full and holds nothing of strictly lower priority to displace.
    public static func queueFull(capacity: Int) -> SchedulingError {
        SchedulingError(
            .queueFull, "the queue is full (\(capacity) waiting) and nothing of lower priority can be displaced")
    }

    /// The service is shutting down and accepts nothing new.
    public static let shuttingDown = SchedulingError(.shuttingDown, "the service is shutting down")

    /// No announcement has `id`.
    public static func unknownAnnouncement(_ id: String) -> SchedulingError {
        SchedulingError(.unknownAnnouncement, "no announcement has id '\(id)'")
    }

    /// The queue is full (HTTP 429).
    public var isQueueFull: Bool { code == .queueFull }
    /// The queue is shutting down (HTTP 503).
    public var isShuttingDown: Bool { code == .shuttingDown }
    /// No announcement has the id (HTTP 404).
    public var isUnknownAnnouncement: Bool { code == .unknownAnnouncement }
    /// A value the queue rejects (HTTP 422).
    public var isInvalidValue: Bool { code == .invalidValue }

    public var description: String { message }
}
