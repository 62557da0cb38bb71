import Foundation
internal import GRDB

/// A row the state store keeps: a public value, stored under its `CodingKeys` (its fields are
/// declared there, once) in ``databaseTableName``.
///
/// The public types cannot be GRDB records themselves, since GRDB is imported internally and a
/// public type's conformances are public: ``StoredRecord`` is their record.
protocol StoredValue: Codable, Sendable {
    /// The table it is stored in.
    static var databaseTableName: String { get }
    /// Takes the row id SQLite gave it when it was inserted; by default nothing keeps it.
    mutating func inserted(rowID: Int64)
}

extension StoredValue {
    mutating func inserted(rowID: Int64) {}
}

/// The GRDB record of a ``StoredValue``: fetched, inserted and queried by its `Columns`, times as
/// milliseconds since 1970 (``MillisecondDates``).
struct StoredRecord<Value: StoredValue>: Codable, FetchableRecord, MutablePersistableRecord, MillisecondDates {
    static var databaseTableName: String { Value.databaseTableName }

    var value: Value

    init(_ value: Value) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        value = try Value(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        try value.encode(to: encoder)
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        value.inserted(rowID: inserted.rowID)
    }
}
