import Foundation
import HTTPTypes
import Hummingbird
import Logging
import SpeakAPI
import SpeechModel

/// The HTTP front of speakd: one router with every route of the API, served by any number of
/// listeners (TCP, Unix socket).
public struct SpeakServer: Sendable {
    /// The announcement queue.
    public let scheduler: any AnnouncementScheduling
    /// The engine.
    public let renderer: any SpeechRenderer
    /// Engine and audio state.
    public let health: any HealthReporting
    /// Limits, heartbeat and CORS.
    public let settings: ServerSettings
    /// The counters behind `/metrics`.
    public let metrics: SpeakMetrics
    /// Where request failures are logged.
    public let logger: Logger

    /// - Parameters:
    ///   - scheduler: the announcement queue.
    ///   - renderer: the engine, for validation, `/v1/speech` and `/v1/voices`.
    ///   - health: the state of engine and audio sink.
    ///   - settings: limits, heartbeat and CORS.
    ///   - metrics: the counters behind `/metrics`.
    ///   - logger: where request failures are logged.
    public init(
        scheduler: any AnnouncementScheduling, renderer: any SpeechRenderer, health: any HealthReporting,
        settings: ServerSettings = ServerSettings(), metrics: SpeakMetrics = SpeakMetrics(),
        logger: Logger = Logger(label: "speakd.server")
    ) {
        self.scheduler = scheduler
        self.renderer = renderer
        self.health = health
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    /// The router with every route; listeners share it.
    public func buildRouter() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        if let origin = settings.corsOrigin {
            router.add(
                middleware: CORSMiddleware(
                    allowOrigin: .custom(origin),
                    allowHeaders: [.accept, .contentType, .origin, .lastEventID],
                    allowMethods: [.get, .post, .delete, .options],
                    exposedHeaders: ["Location"],
                    maxAge: .seconds(600)))
        }
        router.add(middleware: ErrorMiddleware(metrics: metrics))
        let routes = SpeakRoutes(server: self)
        router.post("/v1/announcements", use: routes.post)
        router.get("/v1/announcements", use: routes.list)
        router.get("/v1/announcements/:id", use: routes.status)
        router.delete("/v1/announcements/:id", use: routes.cancel)
        router.delete("/v1/announcements", use: routes.cancelAll)
        router.get("/v1/events", use: routes.events)
        router.post("/v1/speech", use: routes.speech)
        router.get("/v1/voices", use: routes.voices)
        router.get("/healthz", use: routes.healthz)
        router.get("/metrics", use: routes.metricsPage)
        return router
    }
}

extension HTTPField.Name {
    /// The header a reconnecting event-stream client sends with the last id it saw.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}
