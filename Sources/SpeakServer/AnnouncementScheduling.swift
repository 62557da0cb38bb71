import SpeakAPI
import SpeechModel

/// What the HTTP front needs from the announcement queue.
///
/// `AnnouncementQueue` conforms; keeping the routes behind this protocol keeps the server free of
/// scheduling logic and lets route tests drive the real queue or a scripted one.
public protocol AnnouncementScheduling: Sendable {
    /// Accepts `announcement` or throws `SchedulingError` (`queueFull`, `shuttingDown`).
    func submit(_ announcement: Announcement) async throws(SchedulingError) -> AnnouncementAccepted

    /// Cancels one announcement; returns false when it had already finished.
    /// Throws `SchedulingError.unknownAnnouncement` for an id the queue never had (or forgot).
    func cancel(id: String) async throws(SchedulingError) -> Bool

    /// Cancels every waiting and the speaking announcement; returns the ids cancelled.
    func cancelAll() async -> [String]

    /// The speaking announcement first, then the waiting ones in the order they will be spoken.
    func snapshot() async -> [AnnouncementStatus]

    /// One announcement's state, including recently finished ones; nil when unknown.
    func status(id: String) async -> AnnouncementStatus?

    /// Every event with a sequence number greater than `sequence` still in the bounded history,
    /// then live events as they happen. The sequence ends when the queue has shut down and every
    /// event has been delivered.
    func events(after sequence: UInt64?) async -> AsyncStream<SequencedEvent>

    /// Waits for the `finished` event of `id` (at once if it has finished already).
    func finished(id: String) async throws(SchedulingError) -> AnnouncementEvent

    /// The most announcements that may wait at once.
    var capacity: Int { get }
}

/// An event with its position in the queue's event history, used as the SSE `id:`.
public struct SequencedEvent: Sendable, Hashable {
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
    }

    private let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
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

    public var description: String { message }
}

/// Reports the state of the engine and the audio sink for `/healthz`.
public protocol HealthReporting: Sendable {
    /// The current state; `queue` is filled in by the server.
    func health() async -> HealthReport
}
