import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient

extension Speak {
    /// `speak audit`: the daemon's record of every announcement's outcome and every refusal.
    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the daemon's audit log: every announcement's outcome and every refusal, oldest first.",
            discussion: """
                One line per row: when it was queued (or refused), its id (or 'refused'), the front it \
                came through, who sent it, its output, why it finished (or the refusal's error code), \
                and its text. The daemon keeps the log in its state directory: start speakd with \
                --state-dir (the system and user units do).

                Examples:
                  speak audit --since 2026-11-27T00:00:00Z --reason failed
                  speak audit --front schedule --limit 20
                  speak audit --text "lift on level 2"
                  speak audit --ndjson > audit.ndjson
                """)

        @Option(
            help: ArgumentHelp(
                "Only rows queued at or after TIME, RFC 3339 with an offset or Z, e.g. 2026-11-27T14:02:00Z.",
                valueName: "time"))
        var since: String?

        @Option(help: ArgumentHelp("Only rows queued before TIME, RFC 3339.", valueName: "time"))
        var until: String?

        @Option(help: ArgumentHelp("Only rows of this named output.", valueName: "name"))
        var output: String?

        @Option(
            help: ArgumentHelp(
                "Only rows that finished this way (completed, cancelled, failed, …) or were refused with this "
                    + "error code.",
                valueName: "reason"))
        var reason: String?

        @Option(
            help: ArgumentHelp(
                "Only rows that came through this front: http, mqtt, ssip, wyoming, schedule or local.",
                valueName: "front"))
        var front: String?

        @Option(
            help: ArgumentHelp(
                "Only rows whose text contains WORDS as written (letters in either case); private rows never.",
                valueName: "words"))
        var text: String?

        @Option(help: ArgumentHelp("Print at most N rows (default: every matching row).", valueName: "n"))
        var limit: Int?

        @Flag(help: "Print the rows as one JSON object, {\"entries\": [...]}.")
        var json = false

        @Flag(help: "Print the daemon's export: one JSON object per line, as GET /v1/audit?format=ndjson sends it.")
        var ndjson = false

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        /// The most rows the daemon gives in one page.
        static let pageSize = 1_000

        func validate() throws {
            if json, ndjson { throw ValidationError("--json and --ndjson are two formats; give one") }
            if let limit, limit < 1 { throw ValidationError("--limit \(limit): must be at least 1") }
        }

        /// `GET /v1/audit` with the filters given: the page of at most `pageSize` rows after
        /// `cursor`, or with `ndjson` the whole export.
        func path(after cursor: String? = nil, pageSize: Int? = nil, ndjson: Bool = false) -> String {
            let filters: [(String, String?)] = [
                ("since", since), ("until", until), ("output", output), ("reason", reason), ("front", front),
                ("text", text), ("after", cursor), ("limit", pageSize.map(String.init)),
                ("format", ndjson ? "ndjson" : nil),
            ]
            let query = filters.compactMap { name, value in value.map { "\(name)=\(Self.escapeQuery($0))" } }
            return query.isEmpty ? "/v1/audit" : "/v1/audit?" + query.joined(separator: "&")
        }

        func run() async throws {
            let client = try await connection.requireDaemon()
            if ndjson {
                let response = try await client.send("GET", path(ndjson: true))
                try response.checkStatus("audit")
                var body = response.body[...]
                if let limit {
                    // The export has every row; the first `limit` lines are the rows asked for.
                    var lines = 0
                    let end = body.firstIndex { byte in
                        if byte == UInt8(ascii: "\n") { lines += 1 }
                        return lines == limit
                    }
                    if let end { body = body[...end] }
                }
                FileHandle.standardOutput.write(Data(body))
                return
            }
            var entries: [AuditRecord] = []
            var cursor: String?
            var count = 0
            repeat {
                let size = min(Self.pageSize, limit.map { $0 - count } ?? Self.pageSize)
                let response = try await client.send("GET", path(after: cursor, pageSize: size))
                try response.checkStatus("audit")
                let page = try response.decode(AuditPage.self)
                if json {
                    entries += page.entries
                } else {
                    for entry in page.entries { print(Self.line(entry)) }
                }
                count += page.entries.count
                cursor = page.entries.isEmpty ? nil : page.next
            } while cursor != nil && count < (limit ?? .max)
            if json {
                print(
                    String(
                        decoding: try WireFormat.encoder().encode(AuditPage(entries: entries, next: nil)), as: UTF8.self
                    ))
            }
        }

        /// One row as a line: queued, id or `refused`, front, origin, output, reason or error, text.
        static func line(_ record: AuditRecord) -> String {
            let text = record.private == true ? "(private)" : record.text.map { excerpt($0) } ?? "-"
            return [
                record.queued ?? "-", record.id ?? "refused", record.front, record.origin, record.output ?? "default",
                record.reason ?? record.error ?? "-", text,
            ].joined(separator: "  ")
        }

        /// `text` on one line, cut to `width` characters with an ellipsis.
        static func excerpt(_ text: String, width: Int = 40) -> String {
            let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
            return flat.count <= width ? flat : flat.prefix(width - 1) + "…"
        }

        /// `value` for a query string: everything but unreserved characters percent-encoded, so an
        /// offset's `+` is not read as a space.
        static func escapeQuery(_ value: String) -> String {
            value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value
        }

        private static let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:")
    }
}
