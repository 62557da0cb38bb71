import FoundationEssentials
import HTTPTypes
import Hummingbird
import SpeakAPI
import SpeakSchedules
import SpeakService

extension SpeakRoutes {
    // MARK: Schedules

    /// `POST /v1/schedules`: 201 with the schedule, once it is in the database.
    @Sendable func createSchedule(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await jsonBody(request)
        let resource = try await records { () async throws(SpeakError) in try await server.service.createSchedule(body)
        }
        var response = raw(resource.json(), status: .created)
        response.headers[.location] = "/v1/schedules/\(resource.id)"
        return response
    }

    /// `POST /v1/schedule-preview?count=N`: the schedule a `POST /v1/schedules` body would make,
    /// read and refused as that route reads and refuses it, with its next `count` slots (1 to
    /// `SchedulePreview.maxCount`, `SchedulePreview.defaultCount` when not given), each in UTC
    /// and in the schedule's zone (`SchedulePreview`); nothing is stored. 200.
    @Sendable func previewSchedule(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        for (name, _) in query where name != "count" {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue", message: "unknown parameter '\(name)' (count)",
                field: String(name))
        }
        var count = SchedulePreview.defaultCount
        if let text = query["count"] {
            guard text.allSatisfy(\.isASCIIDigit), let value = Int(text), (1...SchedulePreview.maxCount).contains(value)
            else {
                throw APIError(
                    status: .unprocessableContent, code: "invalidValue",
                    message: "count must be a whole number from 1 to \(SchedulePreview.maxCount), not '\(text)'",
                    field: "count")
            }
            count = value
        }
        let body = try await jsonBody(request)
        let preview = try await records { () async throws(SpeakError) in
            try await server.service.previewSchedule(body, count: count)
        }
        return raw(preview.json())
    }

    /// `GET /v1/schedules?after&limit&q&paused`: a page of schedules, oldest first, `{"schedules":
    /// [...], "next"}`, as `/v1/audit` pages its rows; `next` is there when more follow. `q` keeps
    /// the schedules whose id, name or announcement text contains it (case-insensitively), `paused`
    /// those paused (`true`) or active (`false`); the cursor pages within the filtered list.
    @Sendable func listSchedules(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let known: Set = ["after", "limit", "q", "paused"]
        for (name, _) in query where !known.contains(String(name)) {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "unknown parameter '\(name)' (after, limit, q, paused)", field: String(name))
        }
        let limit = try pageLimit(query["limit"].map(String.init))
        let cursor = query["after"].map(String.init)
        let text = query["q"].map(String.init)
        if let text, text.count > Self.maxScheduleSearch {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "q is \(text.count) characters; at most \(Self.maxScheduleSearch) are searched for", field: "q"
            )
        }
        let paused: Bool?
        switch query["paused"].map(String.init) {
        case nil: paused = nil
        case "true": paused = true
        case "false": paused = false
        case let other?:
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "paused must be true or false, not '\(other)'", field: "paused")
        }
        let page = try await records { () async throws(SpeakError) in
            try await server.service.schedules(after: cursor, limit: limit, matching: text, paused: paused)
        }
        return raw(ScheduleResource.list(page.schedules, next: page.next))
    }

    /// The longest `q` of `GET /v1/schedules`: as long as the longest name, and a search is a word
    /// or two of a name or a text.
    static let maxScheduleSearch = ScheduleDefinition.maxNameLength

    /// A page's `limit`: 1 to 1,000, 100 when not given.
    private func pageLimit(_ text: String?) throws(APIError) -> Int {
        guard let text else { return 100 }
        guard text.allSatisfy(\.isASCIIDigit), let value = Int(text), (1...1_000).contains(value) else {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "limit must be a whole number from 1 to 1000, not '\(text)'", field: "limit")
        }
        return value
    }

    /// `GET /v1/schedules/{id}`.
    @Sendable func getSchedule(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        return raw(
            try await records { () async throws(SpeakError) in try await server.service.schedule(id: id) }.json())
    }

    /// `PATCH /v1/schedules/{id}`: the keys given replace the schedule's; `null` removes one.
    @Sendable func patchSchedule(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let body = try await jsonBody(request, mergePatch: true)
        let resource = try await records { () async throws(SpeakError) in
            try await server.service.updateSchedule(id: id, patch: body)
        }
        return raw(resource.json())
    }

    /// `DELETE /v1/schedules/{id}`: 204.
    @Sendable func deleteSchedule(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        try await records { () async throws(SpeakError) in try await server.service.deleteSchedule(id: id) }
        return Response(status: .noContent)
    }

    // MARK: Render ahead

    /// `POST /v1/prerender`: renders an announcement body as its output's session would have it
    /// spoken, without queueing or playing it, so that the render cache holds it when it is
    /// posted: 200 `{"samples", "seconds"}`.
    @Sendable func prerender(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await jsonBody(request)
        return try json(
            try await records { () async throws(SpeakError) in
                try await server.service.prerender(body, origin: access.origin(of: request))
            })
    }

    // MARK: Audit

    /// The query parameters `GET /v1/audit` takes; any other is refused, not ignored.
    static let auditParameters: Set<String> = [
        "since", "until", "output", "reason", "front", "text", "after", "limit", "format",
    ]

    /// The longest `text` a search of the audit log takes, in characters.
    static let auditTextLimit = 200

    /// The fronts an audit row can name: `local` is speakd itself (a repeat it speaks again).
    static let auditFronts: Set<String> = ["http", "mqtt", "ssip", "wyoming", "schedule", "local"]

    /// `GET /v1/audit?since&until&output&reason&front&text&after&limit`: a page of rows, oldest
    /// first; `format=ndjson` streams every matching row, one JSON object per line.
    @Sendable func audit(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        for (name, _) in query where !Self.auditParameters.contains(String(name)) {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "unknown parameter '\(name)' (\(Self.auditParameters.sorted().joined(separator: ", ")))",
                field: String(name))
        }
        var filter = AuditQuery()
        filter.since = try dateQuery(request, "since")
        filter.until = try dateQuery(request, "until")
        filter.output = query["output"].map(String.init)
        filter.reason = query["reason"].map(String.init)
        filter.front = query["front"].map(String.init)
        if let front = filter.front, !Self.auditFronts.contains(front) {
            // A misspelt front would otherwise match nothing and read as "no such rows".
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "unknown front '\(front)' (\(Self.auditFronts.sorted().joined(separator: ", ")))",
                field: "front")
        }
        if let text = query["text"].map(String.init) {
            guard !text.isEmpty, text.count <= Self.auditTextLimit else {
                throw APIError(
                    status: .unprocessableContent, code: "invalidValue",
                    message: "text must be from 1 to \(Self.auditTextLimit) characters, not \(text.count)",
                    field: "text")
            }
            filter.text = text
        }
        if let text = query["after"] {
            guard text.allSatisfy(\.isASCIIDigit), let value = Int64(text) else {
                throw APIError(
                    status: .unprocessableContent, code: "invalidValue",
                    message: "'\(text)' is not a cursor: pass the 'next' of the page before", field: "after")
            }
            filter.after = value
        }
        if let text = query["limit"] {
            guard text.allSatisfy(\.isASCIIDigit), let value = Int(text), (1...1_000).contains(value) else {
                throw APIError(
                    status: .unprocessableContent, code: "invalidValue",
                    message: "limit must be a whole number from 1 to 1000, not '\(text)'", field: "limit")
            }
            filter.limit = value
        }
        switch query["format"].map(String.init) {
        case nil, "json":
            return try json(try await records { () async throws(SpeakError) in try await server.service.audit(filter) })
        case "ndjson":
            return try await exportAudit(filter)
        case let other?:
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "format must be json or ndjson, not '\(other)'", field: "format")
        }
    }

    /// Every row `filter` matches, one JSON object per line, read a page at a time. The first
    /// page is read before the answer starts, so a log that cannot be read is a 503, not an empty
    /// stream.
    private func exportAudit(_ filter: AuditQuery) async throws -> Response {
        var filter = filter
        filter.limit = 500
        let service = server.service
        let first = try await records { () async throws(SpeakError) in try await service.audit(filter) }
        let encoder = WireFormat.encoder()
        let body = ResponseBody { [filter] writer in
            var filter = filter
            var page = first
            while true {
                var buffer = ByteBuffer()
                for record in page.entries {
                    buffer.writeBytes(try encoder.encode(record))
                    buffer.writeInteger(UInt8(ascii: "\n"))
                }
                if buffer.readableBytes > 0 { try await writer.write(buffer) }
                guard let next = page.next.flatMap(Int64.init) else { break }
                filter.after = next
                page = try await service.audit(filter)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: body)
    }

    private func dateQuery(_ request: Request, _ name: String) throws(APIError) -> Date? {
        guard let text = request.uri.queryParameters[name[...]] else { return nil }
        guard
            let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(String(text))
                ?? Date.ISO8601FormatStyle().parse(String(text))
        else {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "'\(text)' is not an RFC 3339 time with an offset (2026-11-27T14:02:00Z)", field: name)
        }
        return date
    }

    // MARK: Helpers

    /// `body`'s result, its `SpeakError` answered with its status.
    private func records<Result>(_ body: () async throws(SpeakError) -> Result) async throws(APIError) -> Result {
        do {
            return try await body()
        } catch {
            throw APIError(error)
        }
    }

    private func raw(_ data: Data, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: WireFormat.jsonContentType],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
