/// What happened to a schedule, in a `schedule` event.
public struct ScheduleChange: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// `POST /v1/schedules` made it.
        case created
        /// `PATCH` changed it.
        case updated
        /// `DELETE` removed it.
        case deleted
        /// A slot came and its announcement was queued: `announcement` is its id.
        case fired
        /// A slot came and its announcement was refused (`detail` says why), or the slot passed
        /// while speakd was down or the clock jumped, and the `missed` policy let it go.
        case skipped
        /// It has no slots left (its `at` passed, or its `COUNT` or `UNTIL` ran out).
        case finished
    }

    public var change: Kind
    /// The slot, RFC 3339 in UTC: for `fired` and `skipped`.
    public var slot: String?
    /// The announcement a `fired` slot queued.
    public var announcement: String?
    /// Why a slot was skipped.
    public var detail: String?

    public init(change: Kind, slot: String? = nil, announcement: String? = nil, detail: String? = nil) {
        self.change = change
        self.slot = slot
        self.announcement = announcement
        self.detail = detail
    }
}
