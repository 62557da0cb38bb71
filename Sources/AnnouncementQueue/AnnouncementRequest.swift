import SpeechModel

/// An announcement as a client asks for it, before the queue gives it an id.
public struct AnnouncementRequest: Sendable, Hashable {
    /// The longest `expiresAfter` the queue accepts, in seconds (one day).
    public static let maximumExpiresAfter: Double = 86_400

    public var utterance: Utterance
    public var priority: AnnouncementPriority
    /// `false` is Apple's interrupting announcement; it matters for `default` priority only.
    public var queue: Bool
    /// Seconds it may wait before it starts; nil waits for ever.
    public var expiresAfter: Double?

    /// - Parameters:
    ///   - utterance: what to say.
    ///   - priority: how urgently it wants to be heard.
    ///   - queue: `false` interrupts a speaking `low` or `default` announcement.
    ///   - expiresAfter: seconds it may wait before it starts, 0 … `maximumExpiresAfter`.
    public init(
        utterance: Utterance, priority: AnnouncementPriority = .default, queue: Bool = true,
        expiresAfter: Double? = nil
    ) {
        self.utterance = utterance
        self.priority = priority
        self.queue = queue
        self.expiresAfter = expiresAfter
    }

    /// Checks the values the queue itself interprets; the error names the field.
    public func validate() throws(AnnouncementQueueError) {
        if let expiresAfter, !(expiresAfter.isFinite && expiresAfter >= 0 && expiresAfter <= Self.maximumExpiresAfter) {
            throw .invalidValue(
                field: "expiresAfter",
                message: "expiresAfter must be a number of seconds from 0 to \(Int(Self.maximumExpiresAfter)), not \(expiresAfter)"
            )
        }
    }
}
