/// The request ids seen lately in this run, the oldest forgotten first: what makes a redelivered
/// MQTT message (a reconnect, a sender's retry) speak once, with or without a state database.
struct RecentRequests: Sendable {
    /// A ring of the ids in the order they came; nil where one was removed.
    private var order: [String?] = []
    private var members: Set<String> = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        order.reserveCapacity(capacity)
    }

    /// Remembers `id`; false when it was already remembered.
    mutating func insert(_ id: String) -> Bool {
        guard !members.contains(id) else { return false }
        if order.count < capacity {
            order.append(id)
        } else {
            if let oldest = order[next] { members.remove(oldest) }
            order[next] = id
            next = (next + 1) % capacity
        }
        members.insert(id)
        return true
    }

    /// Forgets `id`, so it is new again; its place in the ring stays empty until reused.
    mutating func remove(_ id: String) {
        guard members.remove(id) != nil, let index = order.lastIndex(of: id) else { return }
        order[index] = nil
    }

    func contains(_ id: String) -> Bool { members.contains(id) }
}
