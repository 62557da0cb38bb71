import Foundation
import Testing

@testable import SpeakState

@Suite struct ScheduleStoreTests {
    @Test func insertGetUpdateDelete() async throws {
        let dir = TemporaryDirectory()
        let schedules = try StateDatabase(directory: dir.state).schedules
        let first = try await schedules.insert(definition: Data(#"{"every":"1h"}"#.utf8), now: t0)
        let second = try await schedules.insert(definition: Data(#"{"at":"08:00"}"#.utf8), now: t0 + 1)
        #expect(first.id.count == 12)
        #expect(first.id.allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
        #expect(first.id != second.id)
        #expect(first.created == t0 && first.updated == t0 && first.lastSlot == nil)
        #expect(try await schedules.get(id: first.id) == first)
        #expect(try await schedules.all() == [first, second])
        #expect(try await schedules.get(id: "missing") == nil)

        try await schedules.markSlot(id: first.id, slot: t0 + 3600)
        let updated = try #require(
            try await schedules.update(id: first.id, definition: Data(#"{"every":"2h"}"#.utf8), now: t0 + 10).stored)
        #expect(updated.definition == Data(#"{"every":"2h"}"#.utf8))
        #expect(updated.created == t0)
        #expect(updated.updated == t0 + 10)
        #expect(updated.lastSlot == t0 + 3600)
        #expect(try await schedules.update(id: "missing", definition: Data(), now: t0) == .unchanged)

        #expect(try await schedules.delete(id: first.id))
        #expect(!(try await schedules.delete(id: first.id)))
        #expect(try await schedules.all() == [second])
    }

    @Test func lastSlotNeverGoesBack() async throws {
        let dir = TemporaryDirectory()
        let id: String
        do {
            let schedules = try StateDatabase(directory: dir.state).schedules
            id = try await schedules.insert(definition: Data("{}".utf8), now: t0).id
            try await schedules.markSlot(id: id, slot: t0 + 120)
            try await schedules.markSlot(id: id, slot: t0 + 60)
            #expect(try await schedules.get(id: id)?.lastSlot == t0 + 120)
            try await schedules.markSlot(id: id, slot: t0 + 180)
            #expect(!(try await schedules.markSlot(id: "missing", slot: t0)))
        }
        let schedules = try StateDatabase(directory: dir.state).schedules
        #expect(try await schedules.get(id: id)?.lastSlot == t0 + 180)
    }

    @Test func idsAreShortAndRandom() {
        let ids = Set((0..<1000).map { _ in ScheduleStore.newID() })
        #expect(ids.count == 1000)
        #expect(ids.allSatisfy { $0.count == 12 })
    }

    /// What the planner reads at start has no announcement: SQLite leaves it out, so the texts
    /// are read one schedule at a time, when a slot comes.
    @Test func plansLeaveTheAnnouncementInTheDatabase() async throws {
        let dir = TemporaryDirectory()
        let schedules = try StateDatabase(directory: dir.state).schedules
        let text = "Only-in-the-database-" + String(repeating: "x", count: 30_000)
        let definition = #"{"announcement":{"text":"\#(text)"},"at":"2026-12-01T17:45:00Z","missed":"skip"}"#
        let stored = try await schedules.insert(definition: Data(definition.utf8), now: t0)
        try await schedules.markSlot(id: stored.id, slot: t0 + 60)
        let plans = try await schedules.plans()
        #expect(plans.count == 1)
        let plan = try #require(plans.first)
        #expect(plan.id == stored.id && plan.lastSlot == t0 + 60)
        let json = String(decoding: plan.plan, as: UTF8.self)
        #expect(!json.contains("Only-in-the-database") && !json.contains("announcement"), "\(json.prefix(200))")
        #expect(json.contains(#""at":"2026-12-01T17:45:00Z""#), "\(json)")
        // The body is there when asked for by id.
        #expect(try await schedules.get(id: stored.id)?.definition == Data(definition.utf8))
        let usage = try await schedules.usage()
        #expect(usage.count == 1 && usage.bytes == definition.utf8.count)
    }

    /// A write that would pass the room is not made, and says what the stored schedules take;
    /// an update is measured in the place of the definition it replaces.
    @Test func writesStayWithinTheRoom() async throws {
        let dir = TemporaryDirectory()
        let schedules = try StateDatabase(directory: dir.state).schedules
        let room = ScheduleRoom(schedules: 2, bytes: 10)
        let four = Data("1234".utf8)
        let first = try #require(try await schedules.insert(definition: four, now: t0, id: nil, within: room).stored)
        #expect(
            try await schedules.insert(definition: Data("1234567".utf8), now: t0, id: nil, within: room)
                == .full(count: 1, bytes: 4))
        _ = try #require(try await schedules.insert(definition: four, now: t0, id: "b", within: room).stored)
        #expect(
            try await schedules.insert(definition: Data("1".utf8), now: t0, id: nil, within: room)
                == .full(count: 2, bytes: 8))
        #expect(try await schedules.insert(definition: four, now: t0, id: "b", within: room) == .unchanged)
        // 4 of the 10 bytes are the other schedule's: 6 fit in place of the first, 7 do not.
        #expect(
            try await schedules.update(id: first.id, definition: Data("1234567".utf8), now: t0, within: room)
                == .full(count: 2, bytes: 4))
        #expect(
            try await schedules.update(id: first.id, definition: Data("123456".utf8), now: t0, within: room).stored
                != nil)
        #expect(try await schedules.update(id: "missing", definition: four, now: t0, within: room) == .unchanged)
        let usage = try await schedules.usage()
        #expect(usage.count == 2 && usage.bytes == 10)
    }
}
