import Synchronization

/// What an RTP output has sent since the daemon started, for `/healthz` and `/metrics`: RTP
/// packets and their payload bytes, packets that left later than a millisecond after they were
/// due, and the send error that stopped its last stream while no packet has gone out since. The
/// daemon makes one per RTP output and hands it to the sink (`AudioSinkOptions`); the sink counts
/// into it from its pacing thread.
public final class RTPStatistics: Sendable, Hashable {
    private let packetCount = Atomic<Int>(0)
    private let byteCount = Atomic<Int>(0)
    private let lateCount = Atomic<Int>(0)
    private let lastSendError = Mutex<String?>(nil)

    public init() {}

    /// RTP packets sent.
    public var packets: Int { packetCount.load(ordering: .relaxed) }
    /// Payload bytes sent in them.
    public var bytes: Int { byteCount.load(ordering: .relaxed) }
    /// Packets that left more than a millisecond after their deadline.
    public var latePackets: Int { lateCount.load(ordering: .relaxed) }

    /// Why the last packet could not be sent (`sending to 239.255.10.1:5004: Network is
    /// unreachable`); nil once a packet has been sent after it, and before any failed.
    public var sendError: String? { lastSendError.withLock { $0 } }

    func sent(payloadBytes: Int, late: Bool) {
        packetCount.add(1, ordering: .relaxed)
        byteCount.add(payloadBytes, ordering: .relaxed)
        if late { lateCount.add(1, ordering: .relaxed) }
        lastSendError.withLock { if $0 != nil { $0 = nil } }
    }

    func failed(_ message: String) {
        lastSendError.withLock { $0 = message }
    }

    // One output's counters: the same object, not equal numbers.
    public static func == (lhs: RTPStatistics, rhs: RTPStatistics) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
