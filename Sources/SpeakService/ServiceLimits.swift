import FoundationEssentials
import SpeakAPI
import SpeechModel

/// What the service admits, whichever front carries the request: declared here once; the
/// daemon's settings fill it, and the fronts read it from the service (the HTTP body limit, the
/// MQTT packet size, the SSIP message size, `GET /v1/chimes`). A front decodes a body with these
/// limits, so each refusal of a body is the same from every front.
public struct ServiceLimits: Sendable, Hashable {
    /// The most bytes of one request body (HTTP 413 beyond; an MQTT payload over it is refused).
    public var maxBodyBytes: Int
    /// The longest text of one announcement, in characters (413 beyond).
    public var maxTextLength: Int
    /// The most spans one announcement may have (413 beyond).
    public var maxSpans: Int
    /// The most bytes of one clip upload (`PUT /v1/clips/{name}`, 413 beyond); the daemon sets it
    /// to the clip library's largest file (`ClipLibrary.maximumFileBytes`).
    public var maxClipBytes: Int
    /// The chimes a request may name (`chime`, `chimeAfter`), as `GET /v1/chimes` lists them.
    public var chimes: [String]

    /// - Parameters: see the properties of the same names; the defaults are speakd's, and the
    ///   text and span limits are the speech model's (`Utterance.Limits.default`), which
    ///   `speak` checks before it sends.
    public init(
        maxBodyBytes: Int = 64 * 1024, maxTextLength: Int = Utterance.Limits.default.maxTextLength,
        maxSpans: Int = Utterance.Limits.default.maxSpans, chimes: [String] = [], maxClipBytes: Int = 64 << 20
    ) {
        self.maxClipBytes = maxClipBytes
        self.maxBodyBytes = maxBodyBytes
        self.maxTextLength = maxTextLength
        self.maxSpans = maxSpans
        self.chimes = chimes
    }

    /// The most announcements one repeat queues again: what each output remembers of what it
    /// spoke (`POST /v1/repeat?count=`).
    public static let maximumRepeatCount = 16

    /// The text and span limits, as the strict decode takes them.
    public var utterance: Utterance.Limits {
        Utterance.Limits(maxTextLength: maxTextLength, maxSpans: maxSpans)
    }

    /// Refuses a body of `bytes` bytes over `maxBodyBytes` before anything reads it: the fleet
    /// link for an MQTT payload, whose length it knows first.
    public func checkBodySize(_ bytes: Int) throws(SpeakError) {
        guard bytes <= maxBodyBytes else { throw bodyTooLarge(bytes: bytes) }
    }

    /// The one refusal of a body over `maxBodyBytes`, every front's: 413 `tooLarge` naming
    /// `body`, "the body is 1048576 bytes; the limit is 65536".
    /// - Parameter bytes: the body's length; nil when the front stopped reading at the limit and does
    ///   not know it (an HTTP body sent without `Content-Length`), said as "over 65536".
    public func bodyTooLarge(bytes: Int?) -> SpeakError {
        let length = bytes.map { "\($0)" } ?? "over \(maxBodyBytes)"
        return .body(.tooLarge("the body is \(length) bytes; the limit is \(maxBodyBytes)", field: "body"))
    }

    /// Decodes an announcement body strictly, within the limits (`AnnouncementRequest.decode`).
    public func decode(_ body: Data) throws(SpeakError) -> AnnouncementRequest {
        do {
            return try AnnouncementRequest.decode(json: body, limits: utterance)
        } catch {
            throw .body(error)
        }
    }

    /// `decode(_:)`, with the wire field that carries the text (`text`, `spans` or `ssml`) and
    /// the body's keys.
    public func decodeNamingText(_ body: Data) throws(SpeakError) -> AnnouncementRequest.Decoded {
        do {
            return try AnnouncementRequest.decodeNamingText(json: body, limits: utterance)
        } catch {
            throw .body(error)
        }
    }

    /// Decodes a `PUT /v1/session` body strictly (`SessionRequest.decode`).
    public func decodeSession(_ body: Data) throws(SpeakError) -> SessionRequest {
        do {
            return try SessionRequest.decode(json: body)
        } catch {
            throw .body(error)
        }
    }
}
