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
    static let headers = pageHeaders(
        contentSecurityPolicy:
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )

    /// The page for a listener; `tokenRequired` tells its script whether to ask for the token.
    static func response(tokenRequired: Bool) -> Response {
        page(html, headers: headers, tokenRequired: tokenRequired)
    }

    /// The headers of a served page (this one, the operator console): HTML under
    /// `contentSecurityPolicy`, not cached, not sniffed, sent with no referrer.
    static func pageHeaders(contentSecurityPolicy: String) -> HTTPFields {
        [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .contentSecurityPolicy: contentSecurityPolicy,
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
        ]
    }

    /// A served page with its `{{token}}` placeholder filled in: `required` when the listener
    /// needs the token, else `none`.
    static func page(_ template: String, headers: HTTPFields, tokenRequired: Bool) -> Response {
        let page = template.replacing("{{token}}", with: tokenRequired ? "required" : "none")
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }
}
