import AnnouncementRecords
import FoundationEssentials
import SpeakService
import SpeakState

/// The fleet's request ids in the state database, as the service hands them to a front: the
/// store's `StateError` becomes the service's `stateUnavailable`.
public struct StoredRequestMemory: RequestMemory {
    let store: FleetRequestMemory

    /// - Parameter store: the `fleet_request` table.
    public init(_ store: FleetRequestMemory) {
        self.store = store
    }

    public func claim(_ requestId: String, at time: Date) async throws(SpeakError) -> SeenRequest? {
        try stored { () throws(StateError) in
            try store.claim(requestId, at: time).map { SeenRequest(announcement: $0.announcement, report: $0.report) }
        }
    }

    public func accepted(_ requestId: String, announcement: String) async throws(SpeakError) {
        _ = try stored { () throws(StateError) in try store.accepted(requestId, announcement: announcement) }
    }

    public func outcome(_ requestId: String, report: Data) async throws(SpeakError) {
        _ = try stored { () throws(StateError) in try store.outcome(requestId, report: report) }
    }

    public func forget(_ requestId: String) async throws(SpeakError) {
        _ = try stored { () throws(StateError) in try store.forget(requestId) }
    }

    private func stored<Result>(_ body: () throws(StateError) -> Result) throws(SpeakError) -> Result {
        do {
            return try body()
        } catch {
            throw SpeakError(state: error)
        }
    }
}
