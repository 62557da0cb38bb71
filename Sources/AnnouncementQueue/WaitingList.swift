import SpeakAPI
import SpeechModel

/// An accepted announcement that has not finished.
struct PendingAnnouncement: Sendable {
    var announcement: Announcement
    /// Increases with every accepted announcement: "newest" means the largest.
    var order: UInt64
    var expiry: Task<Void, Never>?

    var id: String { announcement.id }
    var priority: AnnouncementPriority { announcement.priority }
}

/// Waiting announcements in the order they will be spoken: high, then default, then low,
/// first come first served within a priority, except that an interrupting (`queue: false`)
/// default goes to the front of the defaults.
struct WaitingList: Sendable {
    private(set) var items: [PendingAnnouncement] = []

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }

    mutating func insert(_ pending: PendingAnnouncement) {
        let priority = pending.priority
        let goesFirst = priority == .default && !pending.announcement.queue
        let index =
            items.firstIndex { goesFirst ? $0.priority <= priority : $0.priority < priority } ?? items.endIndex
        items.insert(pending, at: index)
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

    /// The one a full queue gives up for an announcement of `priority`: of the waiting ones
    /// with strictly lower priority, the newest of the lowest priority, so the least urgent
    /// and least waited-for announcement goes.
    func displacementCandidate(below priority: AnnouncementPriority) -> PendingAnnouncement? {
        let lower = items.filter { $0.priority < priority }
        guard let lowest = lower.map(\.priority).min() else { return nil }
        return lower.filter { $0.priority == lowest }.max { $0.order < $1.order }
    }
}
