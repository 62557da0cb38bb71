import HTTPTypes
import Hummingbird

/// Adds `Access-Control-Expose-Headers` to the response of every cross-origin request.
///
/// A browser reads that header on the actual response, not on the preflight (Fetch standard,
/// "CORS protocol"); Hummingbird 2's `CORSMiddleware` sends it on the preflight only, so without
/// this a kiosk page could read neither `Location` nor the `Retry-After` of a 429.
struct ExposedHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The header names, comma-separated.
    let names: String

    init(_ names: [String]) {
        self.names = names.joined(separator: ", ")
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response = try await next(request, context)
        if request.headers.contains(.origin), request.method != .options {
            response.headers[.accessControlExposeHeaders] = names
        }
        return response
    }
}
