import SpeechModel

extension AnnouncementIntake {
    /// What the intake admits, whichever front carries the request: declared here once; the
    /// daemon's settings fill it, and the fronts read it from the intake (the HTTP body limit, the
    /// MQTT packet size, the SSIP message size, `GET /v1/chimes`).
    public struct Limits: Sendable, Hashable {
        /// The most bytes of one request body (HTTP 413 beyond; an MQTT payload over it is refused).
        public var maxBodyBytes: Int
        /// The longest text of one announcement, in characters (413 beyond).
        public var maxTextLength: Int
        /// The most spans one announcement may have (413 beyond).
        public var maxSpans: Int
        /// The chimes a request may name (`chime`, `chimeAfter`), as `GET /v1/chimes` lists them.
        public var chimes: [String]

        /// - Parameters: see the properties of the same names; the defaults are speakd's, and the
        ///   text and span limits are the speech model's (`Utterance.Limits.default`), which
        ///   `speak` checks before it sends.
        public init(
            maxBodyBytes: Int = 64 * 1024, maxTextLength: Int = Utterance.Limits.default.maxTextLength,
            maxSpans: Int = Utterance.Limits.default.maxSpans, chimes: [String] = []
        ) {
            self.maxBodyBytes = maxBodyBytes
            self.maxTextLength = maxTextLength
            self.maxSpans = maxSpans
            self.chimes = chimes
        }

        /// The text and span limits, as the strict decode takes them.
        public var utterance: Utterance.Limits {
            Utterance.Limits(maxTextLength: maxTextLength, maxSpans: maxSpans)
        }
    }
}
