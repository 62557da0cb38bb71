/// The SSE `id:` of an announcement event: `<epoch>-<sequence>`.
///
/// The epoch names one run of the daemon (its start time in milliseconds since 1970) and the
/// sequence counts that run's events from 1 without gaps, so an id never repeats across restarts,
/// and a client can tell what it missed: after `E-N`, the next event it sees should be `E-(N+1)`;
/// another epoch means the daemon restarted (its events in between are gone), a larger sequence
/// means the daemon's history no longer held the ones in between.
public struct EventID: Sendable, Hashable, CustomStringConvertible {
    /// The daemon run; nil for a bare sequence number, which means the current run.
    public var epoch: UInt64?
    /// The event's number within its run, from 1.
    public var sequence: UInt64

    /// - Parameters: see the properties of the same names.
    public init(epoch: UInt64?, sequence: UInt64) {
        self.epoch = epoch
        self.sequence = sequence
    }

    /// Parses `<epoch>-<sequence>` or a bare `<sequence>`; nil for anything else.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            guard let sequence = UInt64(parts[0]) else { return nil }
            self.init(epoch: nil, sequence: sequence)
        case 2:
            guard let epoch = UInt64(parts[0]), let sequence = UInt64(parts[1]) else { return nil }
            self.init(epoch: epoch, sequence: sequence)
        default:
            return nil
        }
    }

    /// The wire form.
    public var description: String {
        epoch.map { "\($0)-\(sequence)" } ?? String(sequence)
    }
}
