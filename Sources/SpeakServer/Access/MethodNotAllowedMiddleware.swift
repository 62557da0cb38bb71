import HTTPTypes
import Hummingbird
import SpeakAPI

/// Answers 405 `methodNotAllowed` with an `Allow` header for a path the API has under another
/// method, instead of the router's 404, so a client that uses the wrong method is told which
/// ones the path takes.
///
/// Added to the router after every route, it wraps only the router's not-found responder: it runs
/// for requests no route matched, never in front of a real route.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Each route's path segments (`:id` for a parameter) and its methods.
    private let routes: [(segments: [String], methods: [HTTPRequest.Method])]

    /// - Parameter routes: the router's routes (`Router.routes`), once all are added.
    init(routes: [Router<Context>.RouteDescription]) {
        let byPath = Dictionary(grouping: routes, by: { $0.path.description })
        self.routes = byPath.map { path, routes in
            (Self.segments(path), routes.map(\.method))
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let segments = Self.segments(request.uri.path)
        let allowed = routes.filter { Self.matches(segments, $0.segments) }.flatMap(\.methods)
        guard !allowed.isEmpty, !allowed.contains(request.method) else {
            return try await next(request, context)
        }
        let names = Set(allowed.map(\.rawValue)).sorted()
        throw APIError(
            status: .methodNotAllowed, code: ErrorResponse.Code.methodNotAllowed,
            message: "\(request.uri.path) does not take \(request.method); it takes \(names.joined(separator: ", "))",
            headers: [.allow: names.joined(separator: ", ")])
    }

    private static func segments(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    /// A route segment starting with `:` or `{` is a parameter and matches any one segment.
    private static func matches(_ path: [String], _ route: [String]) -> Bool {
        path.count == route.count
            && zip(path, route).allSatisfy { segment, pattern in
                pattern.hasPrefix(":") || pattern.hasPrefix("{") || segment == pattern
            }
    }
}
