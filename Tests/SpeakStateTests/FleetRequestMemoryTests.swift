import Foundation
import Testing

@testable import SpeakState

@Suite struct FleetRequestMemoryTests {
    @Test func secondClaimReturnsTheRecord() async throws {
        let dir = TemporaryDirectory()
        let memory = try StateDatabase(directory: dir.state).fleetRequests
        #expect(memory.capacity == 4096)
        #expect(try await memory.claim("r1", at: t0) == nil)
        #expect(try await memory.claim("r1", at: t0 + 5) == FleetRequestRecord(requestId: "r1", seen: t0))
        #expect(try await memory.accepted("r1", announcement: "a-1"))
        let report = Data(#"{"state":"finished","reason":"completed"}"#.utf8)
        #expect(try await memory.outcome("r1", report: report))
        #expect(
            try await memory.claim("r1", at: t0 + 9)
                == FleetRequestRecord(requestId: "r1", announcement: "a-1", report: report, seen: t0))
        #expect(!(try await memory.accepted("unknown", announcement: "x")))
    }

    @Test func aForgottenRequestCanBeClaimedAgain() async throws {
        let dir = TemporaryDirectory()
        let memory = try StateDatabase(directory: dir.state).fleetRequests
        #expect(try await memory.claim("refused", at: t0) == nil)
        #expect(try await memory.forget("refused"))
        #expect(try await memory.claim("refused", at: t0 + 1) == nil)
    }

    @Test func keepsOnlyTheNewestCapacityRecords() async throws {
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        let memory = FleetRequestMemory(database: db, capacity: 3)
        for n in 1...5 { #expect(try await memory.claim("r\(n)", at: t0 + Double(n)) == nil) }
        // r1 and r2 were pruned, so they count as new; claiming them pushes out r3 and r4.
        #expect(try await memory.claim("r5", at: t0) != nil)
        #expect(try await memory.claim("r1", at: t0) == nil)
        #expect(try await memory.claim("r2", at: t0) == nil)
        #expect(try await memory.claim("r5", at: t0) != nil)
        #expect(try await memory.claim("r3", at: t0) == nil)
    }

    /// The memory keeps the ids of the newest `capacity` claims: an id forgotten among them
    /// leaves its place empty rather than keeping an older one longer.
    @Test func aForgottenIdLeavesItsPlaceEmpty() async throws {
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        let memory = FleetRequestMemory(database: db, capacity: 3)
        for n in 1...3 { #expect(try await memory.claim("r\(n)", at: t0) == nil) }
        #expect(try await memory.forget("r2"))
        #expect(try await memory.claim("r4", at: t0) == nil)
        // The last three claims were r2, r3 and r4; r2 is forgotten, and r1 is not kept in its place.
        #expect(try await memory.claim("r3", at: t0) != nil)
        #expect(try await memory.claim("r4", at: t0) != nil)
        #expect(try await memory.claim("r1", at: t0) == nil)
    }

    @Test func survivesReopen() async throws {
        let dir = TemporaryDirectory()
        do {
            let memory = try StateDatabase(directory: dir.state).fleetRequests
            #expect(try await memory.claim("r1", at: t0) == nil)
            try await memory.accepted("r1", announcement: "a-1")
        }
        let memory = try StateDatabase(directory: dir.state).fleetRequests
        #expect(try await memory.claim("r1", at: t0 + 60)?.announcement == "a-1")
    }
}
