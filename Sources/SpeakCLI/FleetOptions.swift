import ArgumentParser
import Foundation
import SpeakAPI
import SpeakMQTT

/// `speak --mqtt URL --site S (--all | --group G | --device D)`: publish to a fleet of kiosks
/// through an MQTT broker instead of talking to one daemon.
struct FleetOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Publish to a fleet through this MQTT 5 broker, mqtt://HOST[:PORT] or mqtts://HOST[:PORT].",
            valueName: "url"))
    var mqtt: String?

    @Option(help: ArgumentHelp("The fleet's site (with --mqtt).", valueName: "site"))
    var site: String?

    @Option(help: ArgumentHelp("Speak on the kiosks of this group (with --mqtt).", valueName: "group"))
    var group: String?

    @Option(help: ArgumentHelp("Speak on this one kiosk (with --mqtt).", valueName: "id"))
    var device: String?

    @Flag(help: "Speak on every kiosk of the site (with --mqtt).")
    var all = false

    @Option(
        help: ArgumentHelp(
            "With --mqtt --wait: stop after this many kiosks have answered (default: wait for --timeout).",
            valueName: "n"))
    var count: Int?

    @Option(
        help: ArgumentHelp("With --mqtt --wait: seconds to collect outcomes (default 30).", valueName: "seconds"))
    var timeout: Double?

    @Option(name: .customLong("mqtt-username"), help: ArgumentHelp("The MQTT broker user.", valueName: "user"))
    var username: String?

    @Option(
        name: .customLong("mqtt-password-file"),
        help: ArgumentHelp("File whose first line is the MQTT broker password.", valueName: "path"))
    var passwordFile: String?

    @Option(
        name: .customLong("mqtt-ca-file"),
        help: ArgumentHelp("CA certificate of an mqtts:// broker.", valueName: "path"))
    var caFile: String?

    func validate() throws {
        guard let mqtt else {
            if site != nil || group != nil || device != nil || all || count != nil || timeout != nil {
                throw ValidationError("--site, --group, --device, --all, --count and --timeout need --mqtt")
            }
            return
        }
        do {
            _ = try MQTTBrokerURL(parsing: mqtt)
        } catch {
            throw ValidationError("--mqtt \(error)")
        }
        guard let site else { throw ValidationError("--mqtt needs --site") }
        for (flag, level) in [("--site", site), ("--group", group), ("--device", device)] {
            if let level, let problem = FleetTopics.problem(with: level) {
                throw ValidationError("\(flag) '\(level)': \(problem)")
            }
        }
        let targets = [group != nil, device != nil, all].filter { $0 }.count
        if targets != 1 { throw ValidationError("--mqtt needs one of --all, --group G or --device D") }
        if let count, count < 1 { throw ValidationError("--count \(count): must be 1 or more") }
        if let timeout, !(timeout > 0 && timeout.isFinite) {
            throw ValidationError("--timeout \(timeout): must be a positive number of seconds")
        }
    }

    /// The announce topic the flags name.
    var topic: String {
        let topics = FleetTopics(site: site ?? "")
        if let group { return topics.group(group) }
        if let device { return topics.device(device) }
        return topics.all
    }

    /// Publishes `request` at QoS 1 and, with `wait`, prints every kiosk's outcome (one JSON
    /// `FleetReport` a line) until `count` have answered or `timeout` passes.
    /// - Throws: `SpeakFailure` when the broker cannot be reached, or (with `wait`) when an
    ///   outcome was not `completed` or none came.
    func send(_ request: AnnouncementRequest, wait: Bool) async throws {
        var request = request
        let requestId = request.requestId ?? UUID().uuidString.lowercased()
        request.requestId = requestId
        let broker = try MQTTBrokerURL(parsing: mqtt!)
        let password: String?
        do {
            password = try passwordFile.map { path in
                String(
                    try String(contentsOfFile: path, encoding: .utf8).split(
                        separator: "\n", omittingEmptySubsequences: false
                    ).first ?? "")
            }
        } catch {
            throw SpeakFailure.invalidInput("--mqtt-password-file \(passwordFile!): cannot read it")
        }
        let client: MQTTClient
        do {
            client = try MQTTClient(
                .init(
                    broker: broker, clientID: "speak-\(requestId)", cleanStart: true, sessionExpiry: 0,
                    username: username, password: password, caFile: caFile))
        } catch {
            throw SpeakFailure.daemonUnreachable("--mqtt \(broker): \(error)")
        }
        let replies = "speakd/\(site!)/replies/\(requestId)"
        let body = try WireFormat.encoder().encode(request)
        let message = MQTTOutgoing(
            topic: topic, payload: body, responseTopic: wait ? replies : nil, correlationData: Data(requestId.utf8),
            messageExpiry: request.delivery.expiresAfter.map { UInt32(min($0.rounded(.up), Double(UInt32.max))) })
        client.start()
        defer { client.stop() }
        let deadline = ContinuousClock.now + .seconds(timeout ?? 30)
        let connectDeadline = ContinuousClock.now + .seconds(min(timeout ?? 10, 10))
        var published = false
        var messageID: Int32 = -1
        var outcomes: [FleetReport] = []
        let events = client.events
        let stop = Task {
            // Cancelled when the answers are in: then the defer below stops the client.
            guard (try? await Task.sleep(until: wait ? deadline : connectDeadline)) != nil else { return }
            client.stop()
        }
        defer { stop.cancel() }
        for await event in events {
            switch event {
            case .connected:
                if wait { client.subscribe(replies) }
                // Subscribed first (requests on one connection are handled in order), so no
                // outcome can come back before the subscription is in place.
                if !published {
                    messageID = try client.publish(message)
                    published = true
                }
            case .published(let id, let reasonCode):
                guard id == messageID else { continue }
                // The broker's PUBACK says whether anyone will receive it (MQTT 5 reason codes).
                if reasonCode >= 0x80 {
                    throw SpeakFailure.notCompleted(
                        "the broker refused the message to \(topic): \(MQTTClient.reasonDescription(reasonCode))")
                }
                if reasonCode == Self.noMatchingSubscribers {
                    throw SpeakFailure.notCompleted(
                        "no kiosk subscribes to \(topic) (\(MQTTClient.reasonDescription(reasonCode))): nobody hears it"
                    )
                }
                // Without --wait, done once the broker has acknowledged the message (QoS 1):
                // from then on it is the broker's to deliver.
                if !wait {
                    print("\(requestId) published to \(topic)")
                    return
                }
            case .disconnected(let reason):
                if !published { printError("speak: \(broker): \(reason); retrying") }
            case .message(let reply):
                guard let report = try? WireFormat.decoder().decode(FleetReport.self, from: reply.payload) else {
                    continue
                }
                // Unbuffered, a line as each kiosk answers, also into a pipe or file.
                FileHandle.standardOutput.write(reply.payload + Data("\n".utf8))
                outcomes.append(report)
                if let count, outcomes.count >= count {
                    return try Self.check(outcomes)
                }
            }
        }
        guard published else { throw SpeakFailure.daemonUnreachable("no MQTT broker answers at \(broker)") }
        guard wait else {
            throw SpeakFailure.daemonUnreachable("the broker at \(broker) did not acknowledge the message")
        }
        if outcomes.isEmpty { throw SpeakFailure.notCompleted("no kiosk answered within \(timeout ?? 30) s") }
        if let count, outcomes.count < count {
            try? Self.check(outcomes)
            throw SpeakFailure.notCompleted("\(outcomes.count) of \(count) kiosks answered")
        }
        try Self.check(outcomes)
    }

    /// PUBACK's "No matching subscribers": accepted by the broker, delivered to nobody.
    private static let noMatchingSubscribers: Int32 = 0x10

    private static func check(_ outcomes: [FleetReport]) throws {
        let failed = outcomes.filter { $0.event?.success != true }
        if !failed.isEmpty {
            throw SpeakFailure.notCompleted(
                failed.map { "\($0.device): \($0.event?.reason?.rawValue ?? $0.error?.code ?? "failed")" }.joined(
                    separator: ", "))
        }
    }
}
