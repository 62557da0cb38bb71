import Foundation
internal import GRDB

/// What the fleet link remembers of an MQTT request id.
public struct FleetRequestRecord: Codable, Sendable, Equatable {
    /// The request id the sender chose.
    public var requestId: String
    /// The announcement it became, once accepted.
    public var announcement: String?
    /// The final report JSON, once it ended: the answer to a redelivery.
    public var report: Data?
    /// When it was first claimed.
    public var seen: Date

    /// The stored columns.
    enum CodingKeys: String, CodingKey, ColumnExpression {
        case requestId, announcement, report, seen
    }
}

extension FleetRequestRecord: StoredValue {
    /// `seq` (not a field) orders the claims, so the oldest are pruned first.
    static let databaseTableName = "fleet_request"

    /// The columns are the coding keys (``StoredRecord`` stores the fields under them).
    typealias Columns = CodingKeys

    /// The row of `requestId`.
    static func of(_ requestId: String) -> QueryInterfaceRequest<StoredRecord<FleetRequestRecord>> {
        StoredRecord<FleetRequestRecord>.filter(Columns.requestId == requestId)
    }
}

/// MQTT request ids seen recently, so a message redelivered after a restart is answered, not spoken again.
///
/// Only the ids of the newest ``capacity`` claims are kept (a forgotten one leaves its place
/// empty): the oldest are dropped when a new one is claimed.
public final class FleetRequestMemory: Sendable {
    /// How many request ids are kept unless told otherwise.
    public static let defaultCapacity = 4096

    /// How many request ids are kept.
    public let capacity: Int
    private let storage: Storage

    /// A memory in `database` that keeps `capacity` ids; ``StateDatabase/fleetRequests`` keeps the default.
    public convenience init(database: StateDatabase, capacity: Int = FleetRequestMemory.defaultCapacity) {
        self.init(storage: database.storage, capacity: capacity)
    }

    init(storage: Storage, capacity: Int) {
        self.storage = storage
        self.capacity = max(1, capacity)
    }

    /// Claims a request id before acting on it.
    /// - Returns: nil when the id is new and now claimed; the existing record when it was seen before.
    public func claim(_ requestId: String, at time: Date) async throws(StateError) -> FleetRequestRecord? {
        try await storage.write("remember a fleet request") { [capacity] db in
            if let existing = try FleetRequestRecord.of(requestId).fetchOne(db) {
                return existing.value
            }
            var record = StoredRecord(FleetRequestRecord(requestId: requestId, seen: time))
            try record.insert(db)
            // A range of the primary key: the claims before the newest `capacity`, found without
            // stepping through the rows kept.
            try db.cachedStatement(sql: "DELETE FROM fleet_request WHERE seq <= ?")
                .execute(arguments: [db.lastInsertedRowID - Int64(capacity)])
            return nil
        }
    }

    /// Records the announcement a claimed request became.
    @discardableResult
    public func accepted(_ requestId: String, announcement: String) async throws(StateError) -> Bool {
        try await storage.write("remember a fleet request") { db in
            try FleetRequestRecord.of(requestId).updateAll(
                db, FleetRequestRecord.Columns.announcement.set(to: announcement)) > 0
        }
    }

    /// Records the final report of a claimed request, to answer a redelivery with.
    @discardableResult
    public func outcome(_ requestId: String, report: Data) async throws(StateError) -> Bool {
        try await storage.write("remember a fleet request") { db in
            try FleetRequestRecord.of(requestId).updateAll(db, FleetRequestRecord.Columns.report.set(to: report)) > 0
        }
    }

    /// Forgets a request id, so a refused request may be sent again.
    @discardableResult
    public func forget(_ requestId: String) async throws(StateError) -> Bool {
        try await storage.write("forget a fleet request") { db in
            try FleetRequestRecord.of(requestId).deleteAll(db) > 0
        }
    }
}
