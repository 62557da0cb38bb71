import FoundationEssentials
import HTTPTypes
import Hummingbird
import Logging
import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP front of speakd: one router with every route of the API, served by any number of
/// listeners (TCP, Unix socket).
///
/// | route | answer |
/// |---|---|
/// | `POST /v1/announcements` | 202 `AnnouncementAccepted` (`Location` header); `?wait=true`: 200 with the `finished` event |
/// | `GET /v1/announcements` | `AnnouncementList`: speaking first, then waiting in speaking order |
/// | `GET /v1/announcements/{id}` | `AnnouncementStatus`, also for recently finished ones |
/// | `DELETE /v1/announcements/{id}`, `DELETE /v1/announcements` | `CancelResult` (how many this cancelled) |
/// | `POST /v1/announcements/{id}/pause`, `POST /v1/pause` (the speaking one), `?at=word` | `AnnouncementStatus`, `paused`, once the sink is silent; 409 when not speaking |
/// | `POST /v1/announcements/{id}/resume`, `POST /v1/resume` | `AnnouncementStatus`, `speaking`; 409 when not paused |
/// | `GET /v1/events` | `text/event-stream`: `event: queued/started/paused/resumed/finished`, `id: <epoch>-<sequence>` (`EventID`), `data: <event JSON>` |
/// | `POST /v1/speech` | `audio/wav`, rendered without queueing or playing |
/// | `GET /v1/voices` | `VoiceList` |
/// | `GET /v1/chimes` | `ChimeList` |
/// | `GET /v1/clips` | `ClipList` |
/// | `GET /v1/clips/{name}` | the clip as 16-bit WAV |
/// | `PUT /v1/clips/{name}` | `ClipStored` |
/// | `POST /v1/schedules`, `GET /v1/schedules`; `GET`, `PATCH`, `DELETE /v1/schedules/{id}` | the schedules (`ScheduleResource`) |
/// | `POST /v1/schedule-preview` | `SchedulePreview`: the schedule a body would make and its next slots, nothing stored |
/// | `POST /v1/login`, `GET /v1/login`, `POST /v1/logout` | a browser's cookie session, signed in with the token (`BrowserSessions`) |
/// | `GET /healthz` | `HealthReport`, 200 when engine and audio work, else 503 |
/// | `GET /metrics` | Prometheus text format |
/// | `GET /openapi.json` | the OpenAPI 3.1 document of these routes (`OpenAPIDocument`) |
/// | `GET /` | the status page (`StatusPage`), HTML |
/// | `GET /console` | the operator console (`OperatorConsole`), HTML that calls only the routes above |
///
/// Decisions the contract leaves open:
/// - The event stream starts with live events; `Last-Event-ID: N` (or `?after=N`) first replays
///   the events after N still in the history (`0`: all of it). It opens with `retry: 1000` and a
///   comment, sends a `: heartbeat` comment when idle, and ends once the queue has shut down.
/// - While the audio sink is unavailable, new announcements are refused with 503
///   `audioUnavailable` rather than queued silently; those already waiting stay queued until the
///   sink is back. `POST /v1/speech` needs no audio and keeps working.
/// - Who may call is `AccessPolicy`'s: 421 `misdirectedRequest` for a foreign `Host`, 403
///   `forbiddenOrigin` for a web page not allowed by `corsOrigin`, 401 `unauthorized` on TCP
///   without the bearer token (`WWW-Authenticate: Bearer`).
/// - Bodies must be `application/json` (415 `unsupportedMediaType` otherwise) and strict JSON
///   (`StrictJSON`: a trailing comma, a duplicate key, invalid UTF-8, a lone surrogate, `NaN` is
///   400 naming the field; a number out of range is 422 `outOfRange`).
/// - `POST /v1/speech` answers a complete WAV with its length. A render holds it whole, so its
///   audio is capped (the service's `RenderLimits.maxSeconds`; 413 `tooLarge` once the render passes
///   it, naming the field that carries the text) and at most `maxConcurrent` renders hold
///   audio at once, each until its WAV is written to the connection; others wait, and beyond
///   `maxWaiting` waiting ones it is 429 `tooManyRenders`, whichever front's renders they are.
/// - Errors are `{"error": {"code", "message", "field"}}`: 400 `malformedRequest` (not JSON, not
///   an object: `field` is `body`), 413 `tooLarge` (body, text, span count or rendered audio over
///   the limit; `field` is `body`, `text`, `ssml` or `spans`), 422 with the speech model's error kind (`malformed`, `outOfRange`, `unsupported`,
///   `notFound`) or `invalidValue` and the field (`spans[1].pitch`; unknown keys are named too),
///   404 `unknownAnnouncement` (`field`: `id`) or `notFound` (no such route), 405
///   `methodNotAllowed` (a known path under another method, with `Allow`), 429 `queueFull`
///   (with `Retry-After: 1`), 429 `tooManyRenders`, 503 `audioUnavailable` or `shuttingDown`.
public struct SpeakServer: Sendable {
    /// The one door: every route calls it, as every other front does.
    public let service: any SpeakService
    /// Render limits, heartbeat, access and CORS; what an announcement may be is `service.limits`.
    public let settings: ServerSettings
    /// The counters behind `/metrics`.
    public let metrics: SpeakMetrics
    /// Where request failures are logged.
    public let logger: Logger
    /// The browsers signed in with the token (`POST /v1/login`), shared by every listener.
    let sessions: BrowserSessions
    /// The failed sign-ins of each client address, shared by every listener.
    let signIns: SignInLimiter

    /// A server whose routes all call `service`, which other fronts share.
    /// - Parameters:
    ///   - service: the one door.
    ///   - settings: render limits, heartbeat, access and CORS.
    ///   - metrics: the counters behind `/metrics`; the service should count into the same.
    ///   - logger: where request failures are logged.
    ///   - now: the wall clock the cookie sessions expire by; tests pass one they move.
    public init(
        service: any SpeakService, settings: ServerSettings = ServerSettings(),
        metrics: SpeakMetrics = SpeakMetrics(), logger: Logger = Logger(label: "speakd.server"),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.service = service
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.sessions = BrowserSessions(maxAge: settings.sessionMaxAge, limit: settings.maxSessions, now: now)
        self.signIns = SignInLimiter(now: now)
    }

    /// The router with every route, under the access rules of `listener` (`AccessPolicy`): its
    /// `Host` names, and on TCP the bearer token of `settings`. For a listener on port 0 the
    /// `Host` port is not checked; `makeListener(at:logger:)` checks it against the bound port.
    public func buildRouter(for listener: SpeakEndpoint = .tcp(host: "127.0.0.1", port: 0))
        -> Router<BasicRequestContext>
    {
        buildRouter(
            access: AccessPolicy(
                listener: listener, settings: settings, port: BoundPort(listener), sessions: sessions,
                signIns: signIns))
    }

    /// A listener at `address` serving every route under that address's access rules.
    ///
    /// - Parameters:
    ///   - address: where to listen.
    ///   - limits: how many connections it holds and their timeouts.
    ///   - logger: the listener's logger.
    public func makeListener(
        at address: SpeakEndpoint, limits: ConnectionLimits = ConnectionLimits(), logger: Logger
    ) -> SpeakListener {
        let port = BoundPort(address)
        let router = buildRouter(
            access: AccessPolicy(
                listener: address, settings: settings, port: port, sessions: sessions, signIns: signIns))
        let listener = SpeakListener(
            address: address, responder: router.buildResponder(), limits: limits, logger: logger)
        port.attach(listener)
        return listener
    }

    private func buildRouter(access: AccessPolicy) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: RequestSourceMiddleware(policy: access, metrics: metrics))
        if let origin = settings.corsOrigin {
            // A page reads these itself: where a new announcement is, and when to retry a 429.
            let exposed = ["Location", "Retry-After"]
            router.add(
                middleware: CORSMiddleware(
                    allowOrigin: .custom(origin),
                    allowHeaders: [
                        .accept, .authorization, .contentType, .origin, .lastEventID, .announcementKey, .csrfToken,
                    ],
                    allowMethods: [.get, .post, .put, .patch, .delete, .options],
                    exposedHeaders: exposed,
                    maxAge: .seconds(600)))
            // Inside the CORS middleware and outside the error middleware, so error responses get it too.
            router.add(middleware: ExposedHeadersMiddleware(exposed))
        }
        router.add(middleware: LogRequestsMiddleware(.debug))
        router.add(middleware: ErrorMiddleware(metrics: metrics))
        router.add(middleware: BearerTokenMiddleware(policy: access))
        let routes = SpeakRoutes(server: self, access: access)
        router.post("/v1/announcements", use: routes.post)
        router.get("/v1/announcements", use: routes.list)
        router.get("/v1/announcements/:id", use: routes.status)
        router.delete("/v1/announcements/:id", use: routes.cancel)
        router.delete("/v1/announcements", use: routes.cancelAll)
        router.post("/v1/announcements/:id/pause", use: routes.pause)
        router.post("/v1/announcements/:id/resume", use: routes.resume)
        router.post("/v1/pause", use: routes.pause)
        router.post("/v1/resume", use: routes.resume)
        router.get("/v1/events", use: routes.events)
        router.put("/v1/session", use: routes.putSession)
        router.get("/v1/session", use: routes.listSessions)
        router.delete("/v1/session", use: routes.endSession)
        router.post("/v1/announcements/:id/repeat", use: routes.repeatOne)
        router.post("/v1/repeat", use: routes.repeatLast)
        router.post("/v1/speech", use: routes.speech)
        router.post("/v1/prerender", use: routes.prerender)
        router.get("/v1/voices", use: routes.voices)
        router.get("/v1/clips", use: routes.clips)
        router.get("/v1/clips/:name", use: routes.getClip)
        router.put("/v1/clips/:name", use: routes.putClip)
        router.get("/v1/chimes", use: routes.chimes)
        router.post("/v1/schedules", use: routes.createSchedule)
        router.post("/v1/schedule-preview", use: routes.previewSchedule)
        router.get("/v1/schedules", use: routes.listSchedules)
        router.get("/v1/schedules/:id", use: routes.getSchedule)
        router.patch("/v1/schedules/:id", use: routes.patchSchedule)
        router.delete("/v1/schedules/:id", use: routes.deleteSchedule)
        router.get("/v1/audit", use: routes.audit)
        router.post("/v1/login", use: routes.login)
        router.get("/v1/login", use: routes.currentLogin)
        router.post("/v1/logout", use: routes.logout)
        router.get("/healthz", use: routes.healthz)
        router.get("/v1/outputs/:name/sdp", use: routes.sessionDescription)
        router.get("/metrics", use: routes.metricsPage)
        router.get("/openapi.json", use: routes.openAPI)
        let tokenRequired = access.requiresToken
        router.get("/") { _, _ in StatusPage.response(tokenRequired: tokenRequired) }
        router.get("/console") { _, _ in OperatorConsole.response(tokenRequired: tokenRequired) }
        // Last, so it wraps only the not-found answer: a known path under another method is a 405.
        router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes))
        return router
    }
}

extension HTTPField.Name {
    /// The header a reconnecting event-stream client sends with the last id it saw.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
    /// The header with which a private announcement's poster shows its text (docs/privacy.md).
    static let announcementKey = HTTPField.Name("Speak-Announcement-Key")!
    /// The TCP peer's address as the listener read it (`127.0.0.1`), by which failed sign-ins
    /// are counted. Set by the listener only: whatever a client sends is removed first.
    static let speakdClient = HTTPField.Name("Speakd-Client")!
    /// The Unix socket peer's credentials as the listener read them (`uid=1000`), for the
    /// announcement's origin. Set by the listener only: whatever a client sends is removed first.
    static let speakdPeer = HTTPField.Name("Speakd-Peer")!
}
