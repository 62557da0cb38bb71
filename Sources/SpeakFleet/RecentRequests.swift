/// The request ids seen lately, the oldest forgotten first: what makes a redelivered MQTT
/// message (a reconnect, a sender's retry) speak once.
struct RecentRequests: Sendable {
    private var order: [String] = []
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
            members.remove(order[next])
            order[next] = id
            next = (next + 1) % capacity
        }
        members.insert(id)
        return true
    }

    func contains(_ id: String) -> Bool { members.contains(id) }
}
