import HTTPTypes
import Hummingbird
import Logging
import SpeakAPI

/// Turns every error a route throws into the JSON error body, so clients never see an empty
/// or plain-text error response.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: SpeakMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            response = try error.response(from: request, context: context)
        } catch let error as HTTPError {
            response = try Self.translate(error).response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["speakd.error": "\(error)"])
            response = try APIError(
                status: .internalServerError, code: ErrorResponse.Code.internalError, message: "\(error)"
            ).response(from: request, context: context)
        }
        metrics.countResponse(status: response.status.code)
        return response
    }

    private static func translate(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound:
            APIError(status: .notFound, code: ErrorResponse.Code.notFound, message: "no such route")
        case .contentTooLarge:
            .tooLarge(error.body ?? "the body is too large", field: "body")
        case .badRequest:
            .malformed(error.body ?? "bad request")
        default:
            APIError(status: error.status, code: "httpError", message: error.body ?? error.status.reasonPhrase)
        }
    }
}
