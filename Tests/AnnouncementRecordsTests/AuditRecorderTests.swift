import AnnouncementRecords
import Foundation
import Logging
import SpeakAPI
import SpeakState
import Testing

/// The audit log's writer over a real database in a temporary directory.
struct AuditRecorderTests {
    final class Directory {
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("audit-\(UUID().uuidString)")
        deinit { try? FileManager.default.removeItem(at: url) }
    }

    static func event(
        _ type: AnnouncementEvent.Kind, _ id: String, text: String = "Platform four", reason: FinishReason? = nil,
        isPrivate: Bool = false
    ) -> AnnouncementEvent {
        var event = AnnouncementEvent(
            type: type, id: id, text: isPrivate ? "" : text, priority: .high, timestamp: Date(), reason: reason,
            output: "hall")
        event.origin = AnnouncementOrigin(front: "ssip", detail: "client=orca", schedule: nil)
        event.isPrivate = isPrivate
        return event
    }

    @Test func oneRowFromQueuedToFinishedDurableWhenFinishedReturns() async throws {
        let directory = Directory()
        let database = try StateDatabase(directory: directory.url.path)
        let recorder = AuditRecorder(log: database.audit, logger: Logger(label: "test"))
        await recorder.record([Self.event(.queued, "a1")])
        await recorder.record([Self.event(.started, "a1")])
        await recorder.record([Self.event(.finished, "a1", reason: .completed)])
        // No wait: the batch holding `finished` returned after its write and every write before it.
        let rows = try await database.audit.entries(AuditFilter(), after: nil, limit: 10).entries
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row.id == "a1" && row.front == "ssip" && row.origin == "client=orca" && row.output == "hall")
        #expect(row.priority == "high" && row.reason == "completed" && row.text == "Platform four")
        #expect(row.started != nil && row.finished != nil)
        #expect(recorder.problem == nil)
    }

    @Test func privateAndUnstoredTextsStayOut() async throws {
        let directory = Directory()
        let database = try StateDatabase(directory: directory.url.path)
        let recorder = AuditRecorder(log: database.audit, logger: Logger(label: "test"))
        await recorder.record([Self.event(.queued, "p1", isPrivate: true)])
        await recorder.record([Self.event(.finished, "p1", reason: .completed, isPrivate: true)])
        let quiet = AuditRecorder(
            log: database.audit, settings: AuditRecorder.Settings(storesText: false), logger: Logger(label: "test"))
        await quiet.record([Self.event(.queued, "q1")])
        await quiet.record([Self.event(.finished, "q1", reason: .cancelled)])
        let rows = try await database.audit.entries(AuditFilter(), after: nil, limit: 10).entries
        #expect(rows.map(\.text) == [nil, nil])
        #expect(rows.map(\.isPrivate) == [true, false])
        #expect(rows.map(\.reason) == ["completed", "cancelled"])
    }

    @Test func rowsLeftOpenGetAnOutcomeAtTheNextStart() async throws {
        let directory = Directory()
        do {
            let database = try StateDatabase(directory: directory.url.path)
            let recorder = AuditRecorder(log: database.audit, logger: Logger(label: "test"))
            await recorder.record([Self.event(.queued, "open")])
            await recorder.record([Self.event(.finished, "closed", reason: .completed)])
            // Each batch is durable when it returns.
            await recorder.record([Self.event(.queued, "closed")])
            await recorder.record([Self.event(.finished, "closed", reason: .completed)])
        }
        let database = try StateDatabase(directory: directory.url.path)
        let recorder = AuditRecorder(log: database.audit, logger: Logger(label: "test"))
        #expect(recorder.recover() == 1)
        let rows = try await database.audit.entries(AuditFilter(), after: nil, limit: 10).entries
        let open = try #require(rows.first { $0.id == "open" })
        #expect(open.reason == "failed" && open.detail?.contains("speakd stopped") == true)
    }
}
