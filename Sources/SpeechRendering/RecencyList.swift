/// Entries with a size in bytes each, the least recently used going first when room is wanted:
/// the bookkeeping both tiers of the render cache keep (the chunks in memory, the files on disk).
struct RecencyList<Key: Hashable, Value> {
    private struct Entry {
        var value: Value
        var bytes: Int
        var lastUse: UInt64
    }

    private var entries: [Key: Entry] = [:]
    private var clock: UInt64 = 0
    /// The bytes of every entry.
    private(set) var bytes = 0
    /// Entries removed for room.
    private(set) var evictions = 0

    /// How many entries there are.
    var count: Int { entries.count }

    /// Whether `key` has an entry.
    func contains(_ key: Key) -> Bool { entries[key] != nil }

    /// The value of `key`, which is now the most recently used; nil when it has none.
    mutating func use(_ key: Key) -> Value? {
        clock += 1
        guard var entry = entries[key] else { return nil }
        entry.lastUse = clock
        entries[key] = entry
        return entry.value
    }

    /// Keeps `value` under `key` as the most recently used, in place of what was there, after
    /// removing the least recently used until its `bytes` fit in `capacity`.
    /// - Returns: the keys removed for room.
    @discardableResult
    mutating func insert(_ value: Value, bytes: Int, for key: Key, capacity: Int = .max) -> [Key] {
        remove(key)
        let evicted = evict(toFit: bytes, capacity: capacity)
        clock += 1
        entries[key] = Entry(value: value, bytes: bytes, lastUse: clock)
        self.bytes += bytes
        return evicted
    }

    /// Removes the entry of `key`, if there is one.
    mutating func remove(_ key: Key) {
        guard let old = entries.removeValue(forKey: key) else { return }
        bytes -= old.bytes
    }

    /// Removes the least recently used until `bytes` more fit in `capacity`.
    /// - Returns: the keys removed.
    mutating func evict(toFit bytes: Int, capacity: Int) -> [Key] {
        var evicted: [Key] = []
        while self.bytes + bytes > capacity, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries[oldest.key] = nil
            self.bytes -= oldest.value.bytes
            evictions += 1
            evicted.append(oldest.key)
        }
        return evicted
    }
}
