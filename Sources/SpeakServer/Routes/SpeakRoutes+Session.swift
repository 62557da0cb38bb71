import FoundationEssentials
import HTTPTypes
import Hummingbird
import SpeakAPI
import SpeakService

extension SpeakRoutes {
    // MARK: Sessions

    /// `PUT /v1/session`: starts or changes one output's session; 200 with the change.
    @Sendable func putSession(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body = try await jsonBody(request)
        let change: SessionChange
        do {
            change = try await service.putSession(try service.limits.decodeSession(body))
        } catch {
            throw APIError(error)
        }
        return try json(change, status: change.change == .started ? .created : .ok)
    }

    /// `GET /v1/session`: every output's session.
    @Sendable func listSessions(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try json(SessionList(sessions: await service.sessions()))
    }

    /// `DELETE /v1/session?output=NAME` or `?id=ID`: ends a session; 200 with the change.
    @Sendable func endSession(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let output = request.uri.queryParameters["output"].map(String.init)
        let id = request.uri.queryParameters["id"].map(String.init)
        let change: SessionChange
        do {
            change = try await service.endSession(output: output, id: id)
        } catch {
            throw APIError(error)
        }
        return try json(change)
    }

    // MARK: Repeats

    /// `POST /v1/announcements/{id}/repeat`: queues that announcement again; 202.
    @Sendable func repeatOne(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let accepted: AnnouncementAccepted
        do {
            // The original's key, when its poster presents it, is what earns the repeat's key.
            accepted = try await service.repeatAnnouncement(
                id: id, key: request.headers[.announcementKey], origin: access.origin(of: request))
        } catch {
            throw APIError(error)
        }
        var response = try json(accepted, status: .accepted)
        response.headers[.location] = "/v1/announcements/\(accepted.id)"
        return response
    }

    /// `POST /v1/repeat?output=NAME&count=N`: queues the output's last N heard announcements
    /// again; 202.
    @Sendable func repeatLast(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let output = request.uri.queryParameters["output"].map(String.init)
        var count = 1
        if let text = request.uri.queryParameters["count"] {
            guard let number = Int(text) else {
                throw APIError(
                    status: .unprocessableContent, code: "invalidValue",
                    message:
                        "count must be a whole number from 1 to \(ServiceLimits.maximumRepeatCount), not '\(text)'",
                    field: "count")
            }
            count = number
        }
        let accepted: [AnnouncementAccepted]
        do {
            accepted = try await service.repeatLast(
                output: output, count: count, origin: access.origin(of: request))
        } catch {
            throw APIError(error)
        }
        return try json(RepeatResult(announcements: accepted), status: .accepted)
    }
}
