import FoundationEssentials
import SpeakAPI
import SpeakMQTT
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// How a kiosk joins a fleet: the `--mqtt…` settings of speakd.
public struct FleetSettings: Sendable, Hashable {
    /// The broker.
    public var broker: MQTTBrokerURL
    /// This kiosk's device id, also its MQTT client id (so the broker keeps its session).
    public var device: String
    /// The site, the second level of every topic.
    public var site: String
    /// The groups whose announcements it speaks.
    public var groups: [String]
    /// The broker user, if it wants one.
    public var username: String?
    /// A file whose first line is the broker password.
    public var passwordFile: String?
    /// The CA certificate that signed the broker's, for `mqtts://`.
    public var caFile: String?

    /// - Parameters: see the properties of the same names.
    public init(
        broker: MQTTBrokerURL, device: String, site: String, groups: [String] = [], username: String? = nil,
        passwordFile: String? = nil, caFile: String? = nil
    ) {
        self.broker = broker
        self.device = device
        self.site = site
        self.groups = groups
        self.username = username
        self.passwordFile = passwordFile
        self.caFile = caFile
    }

    /// The topics of `site`.
    public var topics: FleetTopics { FleetTopics(site: site) }

    /// The three kinds of announce topic this kiosk subscribes to, and its session commands.
    public var subscriptions: [String] {
        [topics.all] + groups.map { topics.group($0) } + [topics.device(device)]
            + [topics.session(device), topics.sessionEnd(device)]
    }

    /// The schedule command topics this kiosk takes: all, its groups', its own.
    public var scheduleSubscriptions: [String] {
        [topics.allSchedules] + groups.map { topics.groupSchedules($0) } + [topics.deviceSchedules(device)]
    }

    /// Reads the password file: its first line, without the line break.
    /// - Throws: `MQTTError` naming the file.
    public func password() throws -> String? {
        guard let passwordFile else { return nil }
        do {
            let text = try String(contentsOfFile: passwordFile, encoding: .utf8)
            return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        } catch {
            throw MQTTError("mqtt-password-file: cannot read \(passwordFile): \(fileErrorReason(error))")
        }
    }
}
