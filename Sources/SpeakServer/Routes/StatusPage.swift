import HTTPTypes
import Hummingbird

/// The status page served at `GET /`: health of engine, audio and workers, the queue as it
/// changes, the live event stream, a form to post a test announcement and a cancel button per
/// announcement. One HTML file with its style and script inline (`StatusPage/index.html`, compiled
/// in by the EmbedServedFiles build plugin as `html`), no external assets, so it works offline
/// in a kiosk's browser.
///
/// The page itself needs no token: it holds no data. Everything it shows comes from the API with
/// the listener's usual rules; on a listener that needs the token the page asks for it once and
/// keeps it in the tab's session storage (a kiosk browser in a public hall should not remember
/// it), and shows health, which needs none, until then. Announcement texts are untrusted and
/// only ever inserted as text, never as HTML; the content security policy allows no other
/// origin, no framing and no form targets.
enum StatusPage {
    /// The headers of the page: HTML, not cached, not framed, nothing loaded from elsewhere.
    static let headers: HTTPFields = [
        .contentType: "text/html; charset=utf-8",
        .cacheControl: "no-store",
        .contentSecurityPolicy:
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "no-referrer",
    ]

    /// The page for a listener; `tokenRequired` tells its script whether to ask for the token.
    static func response(tokenRequired: Bool) -> Response {
        let page = html.replacing("{{token}}", with: tokenRequired ? "required" : "none")
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }
}
