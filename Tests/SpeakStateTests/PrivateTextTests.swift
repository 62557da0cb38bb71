import Foundation
import Testing

@testable import SpeakState

@Suite struct PrivateTextTests {
    /// Reads every file SQLite keeps and looks for the words byte by byte.
    private func files(_ dir: TemporaryDirectory) -> Data {
        ["speakd.sqlite", "speakd.sqlite-wal", "speakd.sqlite-shm"].reduce(into: Data()) { $0 += dir.bytes($1) }
    }

    @Test func privateTextNeverReachesTheFile() async throws {
        let secret = "PRIVATE-SECRET-8472"
        let visible = "PUBLIC-WORDS-5521"
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        let audit = db.audit

        // Callers pass nil for a private text; these pass it anyway.
        try audit.opened(entry("p1", text: secret, isPrivate: true))
        try audit.opened(entry("n1", text: visible))
        try audit.started(id: "p1", at: t0)
        try audit.repeated(id: "p1")
        try audit.finished(id: "p1", reason: "completed", detail: nil, at: t0)
        try audit.refused(
            AuditEntry(front: "http", origin: "tcp token", queued: t0, error: "busy", text: secret, isPrivate: true))
        try audit.opened(entry("p2", text: secret, isPrivate: true))
        for n in 0..<50 { try audit.opened(entry("p-more-\(n)", text: secret + "-\(n)", isPrivate: true)) }
        _ = try audit.closeUnfinished(reason: "failed", detail: "restart", at: t0)
        #expect(
            try await audit.entries(AuditFilter(), after: nil, limit: 100).entries.filter(\.isPrivate).allSatisfy {
                $0.text == nil
            })
        try audit.prune(AuditRetention(maxAge: nil, maxEntries: 20), now: t0)
        try audit.opened(entry("n2", text: visible))

        let live = files(dir)
        #expect(live.contains(visible))
        #expect(!live.contains(secret))

        try db.checkpoint()
        let checkpointed = files(dir)
        #expect(checkpointed.contains(visible))
        #expect(!checkpointed.contains(secret))

        try db.close()
        let closed = files(dir)
        #expect(closed.contains(visible))
        #expect(!closed.contains(secret))
    }

    /// With secure_delete, a pruned row's words are overwritten, not left in a free page.
    @Test func prunedTextIsOverwritten() throws {
        let gone = "PRUNED-WORDS-3141"
        let dir = TemporaryDirectory()
        let db = try StateDatabase(directory: dir.state)
        try db.audit.opened(entry("old", text: gone))
        try db.audit.finished(id: "old", reason: "completed", detail: nil, at: t0)
        try db.checkpoint()
        #expect(dir.bytes("speakd.sqlite").contains(gone))
        #expect(try db.audit.prune(AuditRetention(maxAge: nil, maxEntries: 0), now: t0) == 1)
        try db.close()
        #expect(!files(dir).contains(gone))
    }
}
