import HTTPTypes
import Hummingbird

/// The operator console served at `GET /console`: the outputs and what each says now, a form to
/// announce (with "Listen first" in the browser), the schedules with a rule builder, and the audit
/// log with filters and export. One HTML file with its style and script inline
/// (`Console/index.html`, compiled in by the EmbedServedFiles build plugin as `html`), with no
/// external assets, so it works offline on a kiosk network (docs/console.md).
///
/// Like the status page, the console holds no data and needs no token; everything it shows and
/// does goes through the public API under the listener's usual rules (no route exists for the
/// console alone). On a listener that needs the token it signs in with it and keeps it in the
/// tab's session storage, and sends it as `Authorization: Bearer`, so a page on another site
/// cannot make the browser act for it (docs/security.md). Texts from the API are only ever
/// inserted as text.
enum OperatorConsole {
    /// The headers of the console: the status page's, and `media-src blob:` so that "Listen first"
    /// can play the WAV the console itself fetched from `POST /v1/speech`.
    static let headers = StatusPage.pageHeaders(
        contentSecurityPolicy:
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; media-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )

    /// The console for a listener; `tokenRequired` tells its script whether to sign in.
    static func response(tokenRequired: Bool) -> Response {
        StatusPage.page(html, headers: headers, tokenRequired: tokenRequired)
    }
}
