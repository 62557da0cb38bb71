import Foundation

/// One announcement's outcome, or one refused request, as the audit log keeps it.
public struct AuditEntry: Codable, Sendable, Equatable {
    /// The row's number, assigned when it is written; the cursor of ``AuditLog/entries(_:after:limit:)``.
    public var seq: Int64?
    /// The announcement id; nil for a refusal that never got one.
    public var id: String?
    /// The front it came through: `http`, `mqtt`, `ssip`, `schedule`.
    public var front: String
    /// Who asked: `unix uid=1000`, `tcp token`, `mqtt client=kiosk-1 requestId=r1`, `schedule id=s1`.
    public var origin: String
    /// The output it was spoken on.
    public var output: String?
    /// Its priority.
    public var priority: String?
    /// When it was accepted; for a refusal, when it was refused. Filters and pruning go by this time.
    /// Set to the current time when written without one.
    public var queued: Date?
    /// When it started to sound.
    public var started: Date?
    /// When it ended.
    public var finished: Date?
    /// How it ended (`completed`, `cancelled`, `failed`, …); nil while it is open and for a refusal.
    public var reason: String?
    /// More about the outcome.
    public var detail: String?
    /// A refusal's error code; nil for an accepted announcement.
    public var error: String?
    /// How many times it was repeated.
    public var repeats: Int
    /// The schedule that made it.
    public var schedule: String?
    /// The words; nil when private or when text auditing is off. Never stored for a private entry.
    public var text: String?
    /// Whether the announcement was private: its text is never written to the file.
    public var isPrivate: Bool

    /// Creates an entry; `seq` is assigned when it is written.
    public init(
        seq: Int64? = nil, id: String? = nil, front: String, origin: String, output: String? = nil,
        priority: String? = nil, queued: Date? = nil, started: Date? = nil, finished: Date? = nil,
        reason: String? = nil, detail: String? = nil, error: String? = nil, repeats: Int = 0,
        schedule: String? = nil, text: String? = nil, isPrivate: Bool = false
    ) {
        self.seq = seq
        self.id = id
        self.front = front
        self.origin = origin
        self.output = output
        self.priority = priority
        self.queued = queued
        self.started = started
        self.finished = finished
        self.reason = reason
        self.detail = detail
        self.error = error
        self.repeats = repeats
        self.schedule = schedule
        self.text = text
        self.isPrivate = isPrivate
    }

    /// True for a refused request.
    public var isRefusal: Bool { error != nil }

    /// The stored columns: the fields above, `isPrivate` as `private`.
    enum CodingKeys: String, CodingKey, CaseIterable {
        case seq, id, front, origin, output, priority, queued, started, finished, reason, detail, error, repeats
        case schedule, text
        case isPrivate = "private"
    }
}

/// One change to the audit log, as the recorder hands it over in a batch.
public enum AuditChange: Sendable, Equatable {
    /// An accepted announcement's row (``AuditLog/opened(_:)``).
    case opened(AuditEntry)
    /// When announcement `id` started to sound.
    case started(id: String, at: Date)
    /// How announcement `id` ended.
    case finished(id: String, reason: String, detail: String?, at: Date)
    /// One more repetition of announcement `id`.
    case repeated(id: String)

    /// Whether it inserts a row.
    public var opens: Bool {
        if case .opened = self { true } else { false }
    }
}

/// Which audit entries to read; every field that is set must match.
public struct AuditFilter: Sendable, Equatable {
    /// Entries whose `queued` time (accepted or refused) is at or after this.
    public var since: Date?
    /// Entries whose `queued` time is before this.
    public var until: Date?
    /// Entries spoken on this output.
    public var output: String?
    /// Entries that ended this way, and refusals with this error code, so one word finds both
    /// (`reason: "output_unavailable"` lists what failed and what was refused for it).
    public var reason: String?
    /// Entries from this front.
    public var front: String?
    /// Entries of this announcement id.
    public var id: String?
    /// Entries made by this schedule.
    public var schedule: String?
    /// Only refusals (true), only announcements (false), or both (nil).
    public var refusals: Bool?
    /// Entries whose stored text contains this, ignoring the case of ASCII letters; a private
    /// entry (no text stored) never matches.
    public var text: String?

    /// Creates a filter; with no arguments it matches every entry.
    public init(
        since: Date? = nil, until: Date? = nil, output: String? = nil, reason: String? = nil,
        front: String? = nil, id: String? = nil, schedule: String? = nil, refusals: Bool? = nil
    ) {
        self.since = since
        self.until = until
        self.output = output
        self.reason = reason
        self.front = front
        self.id = id
        self.schedule = schedule
        self.refusals = refusals
    }
}

/// How long the audit log keeps entries.
public struct AuditRetention: Sendable, Equatable {
    /// Entries older than this are removed; nil keeps them whatever their age.
    public var maxAge: Duration?
    /// Only the newest this many entries are kept.
    public var maxEntries: Int
    /// The most bytes the database's pages in use may take (the audit log is what grows); the
    /// oldest entries go first until it fits. Nil sets no bound but the count.
    public var maxBytes: Int?

    /// Creates a retention policy: 90 days, 100,000 entries and 64 MiB unless told otherwise.
    public init(maxAge: Duration? = .seconds(90 * 86_400), maxEntries: Int = 100_000, maxBytes: Int? = 64 << 20) {
        self.maxAge = maxAge
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
    }
}
