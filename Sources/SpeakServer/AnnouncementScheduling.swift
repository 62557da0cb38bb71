import SpeakAPI
import SpeechModel

/// What the HTTP front needs from the announcement queue.
///
/// `AnnouncementQueue` conforms; keeping the routes behind this protocol keeps the server free of
/// scheduling logic and lets route tests drive the real queue or a scripted one.
public protocol AnnouncementScheduling: Sendable {
    /// Accepts an announcement and gives it an id, or throws `SchedulingError` (`queueFull`,
    /// `shuttingDown`, `invalidValue`).
    func accept(_ request: AnnouncementRequest) async throws(SchedulingError) -> AnnouncementAccepted

    /// Cancels one announcement; returns false when it had already finished or is stopping.
    /// Throws `SchedulingError.unknownAnnouncement` for an id the queue never had (or forgot).
    func cancelAnnouncement(id: String) async throws(SchedulingError) -> Bool

    /// Cancels every waiting and the speaking announcement; returns how many this cancelled.
    func cancelEveryAnnouncement() async -> Int

    /// The speaking announcement first, then the waiting ones in the order they will be spoken.
    func announcementList() async -> [AnnouncementStatus]

    /// One announcement's state, including recently finished ones; nil when unknown.
    func announcementStatus(id: String) async -> AnnouncementStatus?

    /// Events with a sequence number greater than `sequence` still in the bounded history
    /// (nil: live events only), then live events as they happen. The sequence ends when the
    /// queue has shut down and every event has been delivered.
    func eventStream(after sequence: UInt64?) async -> AsyncStream<SequencedAnnouncementEvent>

    /// Waits for the `finished` event of `id` (at once if it has finished already).
    func waitForFinish(id: String) async throws(SchedulingError) -> AnnouncementEvent

    /// The most announcements that may wait at once.
    var capacity: Int { get }
}

/// An event with its position in the queue's event history, used as the SSE `id:`.
public struct SequencedAnnouncementEvent: Sendable, Hashable {
    public var sequence: UInt64
    public var event: AnnouncementEvent

    public init(sequence: UInt64, event: AnnouncementEvent) {
        self.sequence = sequence
        self.event = event
    }
}

/// Why the queue did not do what a request asked.
public struct SchedulingError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case queueFull
        case shuttingDown
        case unknownAnnouncement
        case invalidValue
    }

    private let code: Code
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
        SchedulingError(.queueFull, "the queue is full (\(capacity) waiting) and nothing of lower priority can be displaced")
    }

    /// The service is shutting down and accepts nothing new.
    public static let shuttingDown = SchedulingError(.shuttingDown, "the service is shutting down")

    /// No announcement has `id`.
    public static func unknownAnnouncement(_ id: String) -> SchedulingError {
        SchedulingError(.unknownAnnouncement, "no announcement has id '\(id)'")
    }

    public var isQueueFull: Bool { code == .queueFull }
    public var isShuttingDown: Bool { code == .shuttingDown }
    public var isUnknownAnnouncement: Bool { code == .unknownAnnouncement }
    public var isInvalidValue: Bool { code == .invalidValue }

    public var description: String { message }
}

/// Reports the state of the engine and the audio sink for `/healthz`.
public protocol HealthReporting: Sendable {
    /// The current state; `queue` is filled in by the server.
    func health() async -> HealthReport
}
