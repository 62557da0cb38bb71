/// Where an announcement came from: the front that took it and who sent it there, as the audit
/// log records it. The daemon sets it; a request body cannot.
public struct AnnouncementOrigin: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The front: `http`, `mqtt`, `ssip` or `schedule`.
    public var front: String
    /// Who sent it, in the front's terms: `unix uid=1000`, `tcp token`, `tcp open`,
    /// `mqtt client=kiosk-1 requestId=r1`, `ssip client=orca`, `schedule id=s1`.
    public var detail: String
    /// The schedule whose slot it is, for `front` `schedule`.
    public var schedule: String?
    /// The request's id (`requestId`, or an MQTT message's correlation data), for `front` `mqtt`:
    /// the fleet link names each event's request by it.
    public var requestId: String?

    public init(front: String, detail: String, schedule: String? = nil, requestId: String? = nil) {
        self.front = front
        self.detail = detail
        self.schedule = schedule
        self.requestId = requestId
    }

    public var description: String { "\(front) \(detail)" }

    /// An announcement made inside the daemon with no front (tests, tools).
    public static let local = AnnouncementOrigin(front: "local", detail: "in process")
}
