import SpeechModel

/// How an announcement is delivered, beside what it says: its priority, whether it interrupts,
/// how long it may wait, its chimes and repeats, its replace groups, and whether it is private.
///
/// Declared once for every stage an announcement passes: the request holds it
/// (`AnnouncementRequest.delivery`, its keys flat in the request's JSON object), and the queue's
/// prepared and accepted announcements carry it as it was checked at the door.
public struct AnnouncementDelivery: Sendable, Hashable {
    /// The longest `expiresAfter` the queue accepts, in seconds (one day).
    public static let maximumExpiresAfter: Double = 86_400
    /// The longest `replaceGroup`, in characters.
    public static let maximumReplaceGroupLength = 64
    /// The most groups `replaces` may name.
    public static let maximumReplacesCount = 8

    /// How urgently it wants to be heard; `default` when absent.
    public var priority: AnnouncementPriority
    /// `false` is Apple's interrupting announcement: it interrupts a speaking announcement of
    /// lower or equal, non-high priority.
    public var queue: Bool
    /// Seconds it may wait before it starts; nil waits for ever.
    public var expiresAfter: Double?
    /// The chime played before the speech; absent on the wire is the priority's default.
    public var chime: ChimeChoice
    /// The chime played after the speech (`"chimeAfter"`); absent on the wire is the priority's
    /// default.
    public var chimeAfter: ChimeChoice
    /// How many times it is spoken as this one announcement, and the silence between; nil once.
    public var `repeat`: AnnouncementRepeat?
    /// A name shared by announcements of which only the newest matters (an arrival board, a
    /// progress report): accepting one finishes every other one of the same group in its
    /// output's queue, waiting or speaking, `discarded`. 1 to 64 characters; nil for none.
    public var replaceGroup: String?
    /// Other replace groups this announcement replaces: accepting it finishes every announcement
    /// of these groups in its output's queue, waiting or speaking, `discarded` (a new arrival
    /// board replaces the delay notices still waiting). At most 8 names of 1 to 64 characters.
    public var replaces: [String]
    /// Accepted only to be dropped (`finished`, `discarded`) when its output's queue is busy
    /// (something speaking or waiting): for notices that are worth nothing later.
    public var dropIfBusy: Bool
    /// `"private"`: spoken only on an output configured private (`--output NAME=SPEC,private`),
    /// and its text is left out of every event, log line, listing and status page (docs/privacy.md).
    public var isPrivate: Bool

    /// - Parameters:
    ///   - priority: how urgently it wants to be heard.
    ///   - queue: `false` to interrupt (Apple's non-queued announcement).
    ///   - expiresAfter: seconds it may wait before it starts; nil for ever.
    ///   - chime: the chime before the speech.
    ///   - chimeAfter: the chime after the speech.
    ///   - repeat: how many times it is spoken; nil once.
    ///   - replaceGroup: the group whose other announcements this one replaces; nil for none.
    ///   - replaces: other replace groups whose announcements this one replaces.
    ///   - dropIfBusy: `true` to drop it (`discarded`) when its output's queue is busy.
    ///   - isPrivate: `true` for a private announcement.
    public init(
        priority: AnnouncementPriority = .default, queue: Bool = true, expiresAfter: Double? = nil,
        chime: ChimeChoice = .priorityDefault, chimeAfter: ChimeChoice = .priorityDefault,
        repeat: AnnouncementRepeat? = nil, replaceGroup: String? = nil, replaces: [String] = [],
        dropIfBusy: Bool = false, isPrivate: Bool = false
    ) {
        self.priority = priority
        self.queue = queue
        self.expiresAfter = expiresAfter
        self.chime = chime
        self.chimeAfter = chimeAfter
        self.repeat = `repeat`
        self.replaceGroup = replaceGroup
        self.replaces = replaces
        self.dropIfBusy = dropIfBusy
        self.isPrivate = isPrivate
    }

    /// Checks the values the queue itself interprets; the error names the field.
    public func validate() throws(SpeechInputError) {
        if let expiresAfter, !(expiresAfter.isFinite && expiresAfter >= 0 && expiresAfter <= Self.maximumExpiresAfter) {
            throw .outOfRange(
                field: "expiresAfter",
                "expiresAfter must be a number of seconds from 0 to \(Int(Self.maximumExpiresAfter)), not \(expiresAfter)"
            )
        }
        try `repeat`?.validate()
        for (field, choice) in [("chime", chime), ("chimeAfter", chimeAfter)] {
            if case .named(let name) = choice, name.isEmpty {
                throw .malformed(field: field, "\(field) must be a chime's name (GET /v1/chimes) or null")
            }
        }
        if let replaceGroup, !(1...Self.maximumReplaceGroupLength).contains(replaceGroup.unicodeScalars.count) {
            throw .outOfRange(
                field: "replaceGroup", "replaceGroup must have 1 to \(Self.maximumReplaceGroupLength) characters")
        }
        if replaces.count > Self.maximumReplacesCount {
            throw .outOfRange(
                field: "replaces",
                "replaces may name at most \(Self.maximumReplacesCount) groups, not \(replaces.count)")
        }
        for (index, group) in replaces.enumerated()
        where !(1...Self.maximumReplaceGroupLength).contains(group.unicodeScalars.count) {
            throw .outOfRange(
                field: "replaces[\(index)]",
                "a group's name in replaces must have 1 to \(Self.maximumReplaceGroupLength) characters")
        }
    }
}
