import Foundation
import SpeakService
import SpeakState
import Testing

@testable import ServiceCore

/// The one store of request ids a redelivering front has seen.
@Suite struct RequestStoreTests {
    @Test func recentRequestsRemembersABoundedNumber() {
        var recent = RecentRequests(capacity: 3)
        let inserted = ["a", "a", "b", "c"].map { recent.insert($0) }
        #expect(inserted == [true, false, true, true])
        // A fourth pushes out the oldest, and only it.
        let fourth = recent.insert("d")
        #expect(fourth)
        #expect(!recent.contains("a"))
        #expect(recent.contains("b") && recent.contains("c") && recent.contains("d"))
        let again = recent.insert("a")
        #expect(again)
        #expect(!recent.contains("b"))
    }

    /// A refused request is forgotten, and its place is not taken from an id remembered later.
    @Test func recentRequestsForgetsARefusedRequest() {
        var recent = RecentRequests(capacity: 3)
        for id in ["a", "b"] { _ = recent.insert(id) }
        recent.remove("a")
        #expect(!recent.contains("a"))
        let again = recent.insert("a")
        #expect(again)
        // Full: a, b, a (the first a's slot empty). The next id takes the empty slot first,
        // so b and the second a stay.
        let fourth = recent.insert("c")
        #expect(fourth)
        #expect(recent.contains("a") && recent.contains("b") && recent.contains("c"))
        recent.remove("unknown")
        #expect(recent.contains("a") && recent.contains("b") && recent.contains("c"))
    }

    /// Seen in this run: dropped without an outcome. Seen before a restart (a new store over the
    /// same table): answered with the announcement and report it had. Forgotten after a refusal:
    /// new again, in this run and after a restart.
    @Test func thisRunAndEarlierRunsAreToldApart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-requests-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try StateDatabase(directory: directory.path)
        let first = RequestStore(table: database.fleetRequests)
        #expect(try await first.claim("r1", at: Date()) == nil)
        #expect(try await first.claim("r1", at: Date()) == SeenRequest(thisRun: true))
        try await first.accepted("r1", announcement: "a1")
        try await first.outcome("r1", report: Data("done".utf8))
        #expect(try await first.claim("r2", at: Date()) == nil)
        try await first.forget("r2")
        #expect(try await first.claim("r2", at: Date()) == nil)
        try await first.forget("r2")

        let restarted = RequestStore(table: database.fleetRequests)
        let seen = try await restarted.claim("r1", at: Date())
        #expect(seen == SeenRequest(thisRun: false, announcement: "a1", report: Data("done".utf8)))
        #expect(try await restarted.claim("r1", at: Date()) == SeenRequest(thisRun: true))
        #expect(try await restarted.claim("r2", at: Date()) == nil)
    }

    /// Without a state database, this run's ids are still known.
    @Test func withoutADatabaseThisRunIsRemembered() async throws {
        let store = RequestStore(table: nil)
        #expect(try await store.claim("r1", at: Date()) == nil)
        #expect(try await store.claim("r1", at: Date()) == SeenRequest(thisRun: true))
        try await store.forget("r1")
        #expect(try await store.claim("r1", at: Date()) == nil)
    }
}
