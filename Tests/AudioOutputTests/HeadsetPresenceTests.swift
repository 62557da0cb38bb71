import Testing

@testable import AudioOutput

/// Headphone presence from a sink's ports, and its stream of changes.
@Suite(.timeLimit(.minutes(1)))
struct HeadsetPresenceTests {
    typealias Port = HeadsetPresence.Port

    static let speaker = Port(name: "analog-output-speaker", isHeadphones: false, availability: .unknown)
    static func headphones(_ availability: Port.Availability) -> Port {
        Port(name: "analog-output-headphones", isHeadphones: true, availability: availability)
    }

    @Test(
        "the headphone ports decide; a sink without them goes by its active port; no jack detection is unknown",
        arguments: [
            ([speaker, headphones(.yes)], "analog-output-headphones", true),
            // Pulled out: the server switched to the speaker, which must not count as present.
            ([speaker, headphones(.no)], "analog-output-speaker", false),
            ([speaker, headphones(.unknown)], "analog-output-headphones", nil),
            ([headphones(.no), Port(name: "headset-output", isHeadphones: true, availability: .yes)], nil, true),
            ([Port(name: "usb-out", isHeadphones: false, availability: .no)], "usb-out", false),
            ([Port(name: "usb-out", isHeadphones: false, availability: .yes)], "usb-out", true),
            ([speaker], "analog-output-speaker", nil),
            ([], nil, nil),
        ] as [([Port], String?, Bool?)])
    func presenceFromPorts(ports: [Port], active: String?, expected: Bool?) {
        #expect(HeadsetPresence.presence(ports: ports, active: active) == expected)
    }

    @Test("a watcher gets the value now, then each change once, until finish")
    func changesStream() async {
        let presence = HeadsetPresence(output: "headset")
        let changes = presence.changes()
        presence.update(true)
        presence.update(true)
        presence.update(false)
        presence.update(nil)
        presence.finish()
        var seen: [Bool?] = []
        for await value in changes { seen.append(value) }
        #expect(seen == [nil, true, false, nil])
        #expect(presence.present == nil)
        #expect(presence.output == "headset")
    }
}
