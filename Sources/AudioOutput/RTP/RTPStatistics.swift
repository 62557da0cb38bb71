import Synchronization

/// What an RTP output has sent since the daemon started, for `/healthz` and `/metrics`: RTP
/// packets and their payload bytes, and packets that left later than a millisecond after they
/// were due. The daemon makes one per RTP output and hands it to the sink (`AudioSinkOptions`);
/// the sink counts into it from its pacing thread.
public final class RTPStatistics: Sendable, Hashable {
    private let packetCount = Atomic<Int>(0)
    private let byteCount = Atomic<Int>(0)
    private let lateCount = Atomic<Int>(0)

    public init() {}

    /// RTP packets sent.
    public var packets: Int { packetCount.load(ordering: .relaxed) }
    /// Payload bytes sent in them.
    public var bytes: Int { byteCount.load(ordering: .relaxed) }
    /// Packets that left more than a millisecond after their deadline.
    public var latePackets: Int { lateCount.load(ordering: .relaxed) }

    func sent(payloadBytes: Int, late: Bool) {
        packetCount.add(1, ordering: .relaxed)
        byteCount.add(payloadBytes, ordering: .relaxed)
        if late { lateCount.add(1, ordering: .relaxed) }
    }

    // One output's counters: the same object, not equal numbers.
    public static func == (lhs: RTPStatistics, rhs: RTPStatistics) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
