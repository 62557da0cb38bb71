import ArgumentParser
import Foundation
import SpeakAPI
import Testing

@testable import SpeakCLI

/// `speak audit`, through the parser: its filters become the query, its rows lines.
struct AuditParsingTests {
    func audit(_ arguments: [String]) throws -> Speak.Audit {
        try #require(try Speak.parseAsRoot(["audit"] + arguments) as? Speak.Audit)
    }

    /// Every filter goes into the query, percent-encoded: an offset's `+` is not read as a space.
    @Test func filtersBecomeTheQuery() throws {
        let audit = try audit([
            "--since", "2026-11-27T14:02:00+01:00", "--until", "2026-11-28T00:00:00Z", "--output", "front desk",
            "--reason", "completed", "--front", "schedule", "--text", "lift + 100%", "--limit", "5",
        ])
        #expect(audit.limit == 5)
        let filters =
            "since=2026-11-27T14:02:00%2B01:00&until=2026-11-28T00:00:00Z&output=front%20desk&reason=completed"
            + "&front=schedule&text=lift%20%2B%20100%25"
        #expect(audit.path(pageSize: 5) == "/v1/audit?\(filters)&limit=5")
        #expect(audit.path(after: "42", pageSize: 3) == "/v1/audit?\(filters)&after=42&limit=3")
        #expect(audit.path(ndjson: true) == "/v1/audit?\(filters)&format=ndjson")
        #expect(try self.audit([]).path() == "/v1/audit")
        #expect(Speak.Audit.escapeQuery("a&b=c") == "a%26b%3Dc")
    }

    @Test func formatsAndConnection() throws {
        #expect(try audit(["--json"]).json)
        #expect(try audit(["--ndjson"]).ndjson)
        let before = try #require(try Speak.parseAsRoot(["--socket", "/tmp/s.sock", "audit"]) as? Speak.Audit)
        #expect(try before.connection.candidates(environment: [:]) == [.unixSocket(path: "/tmp/s.sock")])
    }

    @Test(arguments: [
        (["audit", "--json", "--ndjson"], "--json and --ndjson are two formats; give one"),
        (["audit", "--limit", "0"], "--limit 0: must be at least 1"),
        (["audit", "--limit", "many"], "many"),
        (["audit", "--colour", "red"], "--colour"),
    ])
    func invalidAuditInputNamesTheFlag(arguments: [String], expected: String) {
        expectRefused(arguments, naming: expected)
    }

    /// One line per row: queued, id or `refused`, front, origin, output, reason or error, text.
    @Test func rowsBecomeLines() {
        var spoken = AuditRecord(
            id: "fac2cadaa241", front: "schedule", origin: "id=obqtm4j6dn76 slot=2026-11-27T08:34:15Z")
        spoken.queued = "2026-11-27T08:34:15.002Z"
        spoken.output = "default"
        spoken.reason = "completed"
        spoken.text = "Doors closing.\nMind the gap, and please take all of your belongings with you."
        #expect(
            Speak.Audit.line(spoken)
                == "2026-11-27T08:34:15.002Z  fac2cadaa241  schedule  id=obqtm4j6dn76 slot=2026-11-27T08:34:15Z  "
                + "default  completed  Doors closing. Mind the gap, and please…")

        var refused = AuditRecord(id: nil, front: "http", origin: "unix uid=1000")
        refused.queued = "2026-11-27T08:34:20.713Z"
        refused.output = "nowhere"
        refused.error = "invalidValue"
        #expect(
            Speak.Audit.line(refused)
                == "2026-11-27T08:34:20.713Z  refused  http  unix uid=1000  nowhere  invalidValue  -")

        var hidden = AuditRecord(id: "a1", front: "mqtt", origin: "topic=t requestId=r")
        hidden.private = true
        #expect(Speak.Audit.line(hidden) == "-  a1  mqtt  topic=t requestId=r  default  -  (private)")
    }

    @Test func helpListsTheFilters() {
        let help = Speak.helpMessage(for: Speak.Audit.self)
        for flag in [
            "--since", "--until", "--output", "--reason", "--front", "--limit", "--json", "--ndjson", "--socket",
        ] {
            #expect(help.contains(flag), "audit help lacks \(flag)")
        }
    }
}
