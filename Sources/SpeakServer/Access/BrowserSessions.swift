import FoundationEssentials
import Synchronization

/// What a caller may do, by the token it gave: `operator` everything, `read` only read (every
/// `GET` and `HEAD`, the event stream, and ending its own session).
enum AccessRole: String, Sendable, Hashable {
    /// The token's role (`--token-file`).
    case `operator`
    /// The read token's role (`--read-token-file`).
    case read
}

/// The cookie sessions a browser signs in to with the bearer token (`POST /v1/login`), kept in
/// memory: a restart ends them all, and there are at most `limit`.
///
/// A session is two random 256-bit values: the one the `speakd-session` cookie carries, and the
/// CSRF token the page must echo in `X-CSRF-Token` on every request that changes anything. The
/// cookie alone is what a foreign page could make the browser send (were it not `SameSite=Strict`);
/// the CSRF token it cannot read.
final class BrowserSessions: Sendable {
    /// One signed-in browser.
    struct Session: Sendable, Hashable {
        /// The token the page sends back in `X-CSRF-Token`.
        let csrfToken: String
        /// When it ends.
        let expires: Date
        /// The role of the token it was signed in with.
        var role: AccessRole = .operator
    }

    /// How long a session lasts from sign-in.
    let maxAge: Duration
    /// The most sessions kept; signing in past it ends the one that expires first.
    let limit: Int
    private let now: @Sendable () -> Date
    private let sessions = Mutex<[String: Session]>([:])

    /// - Parameters:
    ///   - maxAge: how long a session lasts from sign-in.
    ///   - limit: the most sessions kept at once.
    ///   - now: the wall clock; tests pass one they move.
    init(maxAge: Duration, limit: Int = 64, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maxAge = maxAge
        self.limit = max(1, limit)
        self.now = now
    }

    /// The session's length in whole seconds, as `Max-Age` gives it.
    var maxAgeSeconds: Int { Int(maxAge.components.seconds) }

    /// Starts a session with `role`; returns the cookie's value and the session.
    func start(role: AccessRole = .operator) -> (id: String, session: Session) {
        let at = now()
        let id = Self.randomToken()
        let session = Session(
            csrfToken: Self.randomToken(), expires: at.addingTimeInterval(Double(maxAgeSeconds)), role: role)
        sessions.withLock { sessions in
            sessions = sessions.filter { $0.value.expires > at }
            while sessions.count >= limit, let oldest = sessions.min(by: { $0.value.expires < $1.value.expires }) {
                sessions[oldest.key] = nil
            }
            sessions[id] = session
        }
        return (id, session)
    }

    /// The live session a cookie names; nil when it names none, or one that has expired (which
    /// is then forgotten).
    func session(_ id: String) -> Session? {
        let at = now()
        return sessions.withLock { sessions in
            // Looked up by the whole value: a dictionary's hash does not reveal how much of a
            // guess was right the way a byte-by-byte comparison would.
            guard let session = sessions[id] else { return nil }
            guard session.expires > at else {
                sessions[id] = nil
                return nil
            }
            return session
        }
    }

    /// Ends a session; false when there was none.
    @discardableResult
    func end(_ id: String) -> Bool {
        sessions.withLock { $0.removeValue(forKey: id) != nil }
    }

    /// How many sessions are kept, expired ones not yet forgotten included.
    var count: Int { sessions.withLock { $0.count } }

    /// 32 bytes from the system's random source (getrandom on Linux), as 64 hex digits.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        for _ in 0..<4 {
            let word = generator.next() as UInt64
            let hex = String(word, radix: 16)
            text += String(repeating: "0", count: 16 - hex.count) + hex
        }
        return text
    }
}
