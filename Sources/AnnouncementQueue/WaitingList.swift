import SpeakAPI
import SpeechModel

/// An accepted announcement that has not finished.
struct PendingAnnouncement: Sendable {
    var announcement: Announcement
    /// Increases with every accepted announcement: "newest" means the largest.
    var order: UInt64
    var expiry: Task<Void, Never>?
    /// `PreparedAnnouncement.yieldsPlace`.
    var yieldsPlace = false

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
    ///
    /// Places are shared fairly (`yieldsPlace`): one that does not yield takes the place of one
    /// that does first, of any priority, and one that yields only ever takes another's that yields.
    func displacementCandidate(below priority: AnnouncementPriority, yieldsPlace: Bool) -> PendingAnnouncement? {
        let yielding = items.filter(\.yieldsPlace)
        if yieldsPlace { return Self.newestOfLowest(yielding.filter { $0.priority < priority }) }
        return Self.newestOfLowest(yielding) ?? Self.newestOfLowest(items.filter { $0.priority < priority })
    }

    private static func newestOfLowest(_ candidates: [PendingAnnouncement]) -> PendingAnnouncement? {
        guard let lowest = candidates.map(\.priority).min() else { return nil }
        return candidates.filter { $0.priority == lowest }.max { $0.order < $1.order }
    }
}
