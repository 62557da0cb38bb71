/// One row of the audit log (`GET /v1/audit`): an announcement's outcome, or a refusal.
public struct AuditRecord: Sendable, Hashable, Codable {
    /// The announcement's id; absent for a refusal.
    public var id: String?
    /// The front it came through: `http`, `mqtt`, `ssip`, `schedule` (`local` inside the daemon).
    public var front: String
    /// Who sent it there (`unix uid=1000`, `tcp token`, `topic=… requestId=…`, `client=…`, `id=… slot=…`).
    public var origin: String
    public var output: String?
    public var priority: AnnouncementPriority?
    /// When it was accepted, or refused; ISO 8601 in UTC with milliseconds.
    public var queued: String?
    /// When it was first heard.
    public var started: String?
    /// When it finished.
    public var finished: String?
    /// Why it finished (`FinishReason`); absent while it has not, and for a refusal.
    public var reason: String?
    public var detail: String?
    /// A refusal's error code (`queueFull`, `invalidValue`, …).
    public var error: String?
    /// How many times it was repeated on request.
    public var repeats: Int
    /// The schedule whose slot it was.
    public var schedule: String?
    /// Its text, unless it was private or `--audit-text off`.
    public var text: String?
    /// True for a private announcement; absent otherwise.
    public var `private`: Bool?

    public init(id: String?, front: String, origin: String, repeats: Int = 0) {
        self.id = id
        self.front = front
        self.origin = origin
        self.repeats = repeats
    }
}

/// `GET /v1/audit`: a page of rows, oldest first, and the cursor of the next page.
public struct AuditPage: Sendable, Hashable, Codable {
    public var entries: [AuditRecord]
    /// Pass as `?after=` for the next page; absent on the last.
    public var next: String?

    public init(entries: [AuditRecord], next: String?) {
        self.entries = entries
        self.next = next
    }
}
