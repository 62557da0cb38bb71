import FoundationEssentials
import SpeakService
import SpeakState
import Synchronization

/// The one store of the request ids a redelivering front (MQTT) has seen: this run's in memory,
/// and, with a state database, the `fleet_request` table, which keeps them and their outcomes
/// across restarts. This run's ids are looked up first, so a message delivered twice in one run
/// is dropped without a database read, and still when the database cannot be read.
public final class RequestStore: RequestMemory {
    private let recent: Mutex<RecentRequests>
    private let table: FleetRequestMemory?

    /// - Parameters:
    ///   - table: the request ids kept across restarts; nil keeps this run's only.
    ///   - capacity: how many of this run's ids are kept in memory.
    public init(table: FleetRequestMemory?, capacity: Int = 4_096) {
        self.table = table
        self.recent = Mutex(RecentRequests(capacity: capacity))
    }

    public func claim(_ requestId: String, at time: Date) async throws(SpeakError) -> SeenRequest? {
        guard recent.withLock({ $0.insert(requestId) }) else { return SeenRequest(thisRun: true) }
        guard let table else { return nil }
        let record = try await stored { () async throws(StateError) in try await table.claim(requestId, at: time) }
        return record.map { SeenRequest(thisRun: false, announcement: $0.announcement, report: $0.report) }
    }

    public func accepted(_ requestId: String, announcement: String) async throws(SpeakError) {
        guard let table else { return }
        _ = try await stored { () async throws(StateError) in
            try await table.accepted(requestId, announcement: announcement)
        }
    }

    public func outcome(_ requestId: String, report: Data) async throws(SpeakError) {
        guard let table else { return }
        _ = try await stored { () async throws(StateError) in try await table.outcome(requestId, report: report) }
    }

    public func forget(_ requestId: String) async throws(SpeakError) {
        recent.withLock { $0.remove(requestId) }
        guard let table else { return }
        _ = try await stored { () async throws(StateError) in try await table.forget(requestId) }
    }

    private func stored<Result>(_ body: () async throws(StateError) -> Result) async throws(SpeakError) -> Result {
        do {
            return try await body()
        } catch {
            throw SpeakError(state: error)
        }
    }
}
