import SpeakAPI
import SpeechModel

/// An accepted announcement that has not finished.
struct PendingAnnouncement: Sendable {
    var announcement: Announcement
    /// Increases with every accepted announcement: "newest" means the largest.
    var order: UInt64
    var expiry: Task<Void, Never>?
    /// Whose waiting places it takes (`QueueShare`).
    var share = QueueShare.live
    /// Its zone announcement, when it is one zone's part of an announcement heard in several.
    var member: ZoneMember?

    var id: String { announcement.id }
    var priority: AnnouncementPriority { announcement.delivery.priority }
}

/// Waiting announcements in the order they will be spoken: high, then default, then low;
/// within a priority live announcements before scheduled and SSIP ones (`QueueShare`), and
/// first come first served among each, except that an interrupting (`queue: false`) default
/// goes to the front of the defaults of its kind.
struct WaitingList: Sendable {
    private(set) var items: [PendingAnnouncement] = []

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    /// How many of `share` wait.
    func count(in share: QueueShare) -> Int {
        items.reduce(0) { $0 + ($1.share == share ? 1 : 0) }
    }

    mutating func insert(_ pending: PendingAnnouncement) {
        let index = items.firstIndex { Self.goesBefore(pending, $0) } ?? items.endIndex
        items.insert(pending, at: index)
    }

    /// Whether `new` is spoken before `waiting`, which was there first.
    private static func goesBefore(_ new: PendingAnnouncement, _ waiting: PendingAnnouncement) -> Bool {
        guard new.priority == waiting.priority else { return new.priority > waiting.priority }
        let newIsLive = new.share == .live
        guard newIsLive == (waiting.share == .live) else { return newIsLive }
        return new.priority == .default && !new.announcement.delivery.queue
    }

    mutating func popFirst() -> PendingAnnouncement? {
        items.isEmpty ? nil : items.removeFirst()
    }

    mutating func remove(id: String) -> PendingAnnouncement? {
        guard let index = index(of: id) else { return nil }
        return items.remove(at: index)
    }

    mutating func removeAll() -> [PendingAnnouncement] {
        defer { items = [] }
        return items
    }

    func index(of id: String) -> Int? {
        items.firstIndex { $0.id == id }
    }

    /// The one a full share gives up for an announcement of `priority`: of the waiting ones of
    /// `share` with strictly lower priority, the newest of the lowest priority, so the least
    /// urgent and least waited-for announcement goes. A share never gives up another's places.
    func displacementCandidate(below priority: AnnouncementPriority, in share: QueueShare) -> PendingAnnouncement? {
        let candidates = items.filter { $0.share == share && $0.priority < priority }
        guard let lowest = candidates.map(\.priority).min() else { return nil }
        return candidates.filter { $0.priority == lowest }.max { $0.order < $1.order }
    }
}
