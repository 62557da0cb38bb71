#if canImport(Glibc)
import Glibc
#endif

/// An RTP output as written in a sink spec:
/// `rtp://GROUP_OR_HOST:PORT?codec=pcmu&ptime=20&ttl=1&dscp=46&iface=eth0&ssrc=…&delay=0&sap=on`.
///
/// IP speakers and paging endpoints listen to RTP on a multicast group (or a unicast port); this
/// says where to send, in which payload format, and how the packets are marked. Every parameter
/// is checked when the spec is parsed, so a bad one stops the daemon's start naming it.
public struct RTPStream: Sendable, Hashable, CustomStringConvertible {
    /// The payload format of the packets.
    public enum Codec: Sendable, Hashable {
        /// G.711 µ-law, payload type 0, 8 kHz.
        case pcmu
        /// G.711 A-law, payload type 8, 8 kHz.
        case pcma
        /// 16-bit linear PCM in network byte order at `rate` (16 or 48 kHz), dynamic payload type.
        case l16(rate: Int)

        /// Samples per second of the RTP clock, which is also the sample rate sent.
        public var clockRate: Int {
            switch self {
            case .pcmu, .pcma: 8000
            case .l16(let rate): rate
            }
        }

        /// Bytes of payload per sample.
        public var bytesPerSample: Int {
            switch self {
            case .pcmu, .pcma: 1
            case .l16: 2
            }
        }

        /// The encoding name of an SDP `rtpmap`.
        public var encodingName: String {
            switch self {
            case .pcmu: "PCMU"
            case .pcma: "PCMA"
            case .l16: "L16"
            }
        }
    }

    /// The destination address, numeric, as given (without brackets).
    public let host: String
    /// The destination's 4 (IPv4) or 16 (IPv6) bytes.
    public let addressBytes: [UInt8]
    /// The RTP port; RTCP goes to `port + 1`.
    public let port: Int
    public let codec: Codec
    /// The RTP payload type: 0 or 8 for G.711, `pt=` (96 by default) for L16.
    public let payloadType: Int
    /// Milliseconds of audio per packet (10–40).
    public let ptimeMilliseconds: Int
    /// Hops a multicast packet may take (`IP_MULTICAST_TTL`/`IPV6_MULTICAST_HOPS`); for unicast
    /// the unicast hop limit.
    public let ttl: Int
    /// The DiffServ code point of every packet (EF, 46, by default), in `IP_TOS`/`IPV6_TCLASS`.
    public let dscp: Int
    /// The interface to send from, by name; nil for the routing table's choice.
    public let interface: String?
    /// The synchronisation source; nil to derive it from the output's name.
    public let ssrc: UInt32?
    /// How long the receiver takes from packet to sound, in milliseconds: `started` and
    /// `finished` are when the packets leave plus this.
    public let receiverDelayMilliseconds: Int
    /// Where SAP announcements go: nil for none (`sap=off`); by default the scope's SAP group.
    public let sapGroup: String?

    /// True for an IPv6 destination.
    public var isIPv6: Bool { addressBytes.count == 16 }

    /// True when the destination is a multicast group.
    public var isMulticast: Bool { isIPv6 ? addressBytes[0] == 0xff : (224...239).contains(Int(addressBytes[0])) }

    /// Samples (at the RTP clock) in one packet.
    public var samplesPerPacket: Int { codec.clockRate * ptimeMilliseconds / 1000 }

    /// The spec as it parses back.
    public let description: String

    /// Parses the part of a sink spec after `rtp:` (`//HOST:PORT?PARAMS`).
    /// - Throws: `AudioOutputError.invalidSpec` naming the parameter that is wrong.
    public init(parsing value: String) throws(AudioOutputError) {
        let spec = "rtp:" + value
        func refuse(_ message: String) -> AudioOutputError {
            .invalidSpec(spec, "RTP output '\(spec)': \(message)")
        }
        guard value.hasPrefix("//") else {
            throw refuse(
                "expected rtp://ADDRESS:PORT?codec=pcmu|pcma|l16&ptime=MS&ttl=N&dscp=N&iface=NAME&ssrc=N&delay=MS&sap=on|off|GROUP"
            )
        }
        let rest = value.dropFirst(2)
        let (authority, query): (Substring, Substring?) =
            if let mark = rest.firstIndex(of: "?") {
                (rest[..<mark], rest[rest.index(after: mark)...])
            } else {
                (rest, nil)
            }
        // Host and port: `[v6]:port` or `v4:port`.
        let hostPart: Substring
        let portPart: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]"),
                authority[authority.index(after: close)...].hasPrefix(":")
            else { throw refuse("an IPv6 address is written [ADDRESS]:PORT") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            portPart = authority[authority.index(close, offsetBy: 2)...]
        } else {
            guard let colon = authority.lastIndex(of: ":") else { throw refuse("no port; expected ADDRESS:PORT") }
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard let bytes = Self.numericAddress(String(hostPart)) else {
            throw refuse("address '\(hostPart)' is not a numeric IPv4 or IPv6 address")
        }
        guard let port = Int(portPart), (1...65534).contains(port) else {
            throw refuse("port '\(portPart)' is not a number from 1 to 65534 (RTCP uses the port after it)")
        }
        host = String(hostPart)
        addressBytes = bytes
        self.port = port

        var parameters: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).lowercased()
            guard parts.count == 2, !parts[1].isEmpty else { throw refuse("parameter '\(key)' has no value") }
            guard Self.parameterNames.contains(key) else {
                throw refuse(
                    "unknown parameter '\(key)'; expected \(Self.parameterNames.sorted().joined(separator: ", "))")
            }
            guard parameters[key] == nil else { throw refuse("parameter '\(key)' is given twice") }
            parameters[key] = String(parts[1])
        }
        func integer(_ key: String, _ range: ClosedRange<Int>, default fallback: Int) throws(AudioOutputError) -> Int {
            guard let text = parameters[key] else { return fallback }
            guard let number = Int(text), range.contains(number) else {
                throw refuse("\(key)=\(text) is not a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        let codecName = parameters["codec"]?.lowercased() ?? "pcmu"
        switch codecName {
        case "pcmu", "g711u", "ulaw": codec = .pcmu
        case "pcma", "g711a", "alaw": codec = .pcma
        case "l16":
            let rate = try integer("rate", 16000...48000, default: 16000)
            guard rate == 16000 || rate == 48000 else { throw refuse("rate=\(rate) is not 16000 or 48000") }
            codec = .l16(rate: rate)
        default: throw refuse("codec=\(codecName) is not pcmu, pcma or l16")
        }
        let isL16 = codec.encodingName == "L16"
        if let rate = parameters["rate"], !isL16 {
            throw refuse("rate=\(rate) applies to codec=l16 only; G.711 is always 8000 Hz")
        }
        if let pt = parameters["pt"], !isL16 { throw refuse("pt=\(pt) applies to codec=l16 only") }
        payloadType =
            switch codec {
            case .pcmu: 0
            case .pcma: 8
            case .l16: try integer("pt", 96...127, default: 96)
            }
        ptimeMilliseconds = try integer("ptime", 10...40, default: 20)
        ttl = try integer("ttl", 1...255, default: 1)
        dscp = try integer("dscp", 0...63, default: 46)
        receiverDelayMilliseconds = try integer("delay", 0...1000, default: 0)
        if let name = parameters["iface"] {
            guard name.utf8.count < Int(IF_NAMESIZE), if_nametoindex(name) != 0 else {
                throw refuse("iface=\(name) is not a network interface of this machine")
            }
            interface = name
        } else {
            interface = nil
        }
        if let text = parameters["ssrc"] {
            let parsed = text.lowercased().hasPrefix("0x") ? UInt32(text.dropFirst(2), radix: 16) : UInt32(text)
            guard let parsed else { throw refuse("ssrc=\(text) is not a 32-bit number (decimal or 0x hex)") }
            ssrc = parsed
        } else {
            ssrc = nil
        }
        let multicast = bytes.count == 16 ? bytes[0] == 0xff : (224...239).contains(Int(bytes[0]))
        switch parameters["sap"]?.lowercased() {
        case "off", "no", "false": sapGroup = nil
        case nil, "on", "yes", "true":
            // SAP announces multicast sessions; a unicast stream is configured by its SDP file.
            sapGroup = multicast ? Self.sapGroup(for: bytes) : nil
        case let group?:
            guard let groupBytes = Self.numericAddress(group), groupBytes.count == bytes.count else {
                throw refuse("sap=\(group) is not on, off or a numeric group of the stream's address family")
            }
            sapGroup = group
        }
        description = spec
    }

    static let parameterNames: Set<String> = [
        "codec", "rate", "pt", "ptime", "ttl", "dscp", "iface", "ssrc", "delay", "sap",
    ]

    /// The RFC 2974 SAP group for a stream's scope: 239.255.255.255 for IPv4's administratively
    /// scoped range (where IP speakers listen), `ffX::2:7ffe` in the IPv6 group's own scope X.
    static func sapGroup(for bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return "239.255.255.255" }
        let scope = bytes[1] & 0x0f
        return "ff0\(String(scope, radix: 16))::2:7ffe"
    }

    /// The bytes of a numeric IPv4 or IPv6 address; nil for anything else (names are not looked up).
    static func numericAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// The SSRC of the output called `outputName`: `ssrc=` when given, otherwise a hash of the
    /// name (FNV-1a), so it stays the same across restarts and differs between outputs.
    public func ssrc(forOutput outputName: String) -> UInt32 {
        if let ssrc { return ssrc }
        var hash: UInt32 = 2_166_136_261
        for byte in outputName.utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        return hash
    }

    /// The session description of the output called `outputName`, with this machine's address
    /// towards the destination as its origin.
    public func sessionDescription(outputName: String) -> String {
        let origin = UDPSender.sourceAddress(towards: addressBytes, port: port).map(UDPSender.text)
        return sdp(outputName: outputName, origin: origin ?? (isIPv6 ? "::" : "0.0.0.0"))
    }

    /// The session description a receiver needs (RFC 8866), as `GET /v1/outputs/{name}/sdp`
    /// answers it and SAP announces it.
    /// - Parameters:
    ///   - outputName: the output's name, in the session name.
    ///   - origin: the sender's own address, numeric.
    public func sdp(outputName: String, origin: String) -> String {
        let family = isIPv6 ? "IP6" : "IP4"
        let originFamily = origin.contains(":") ? "IP6" : "IP4"
        let connection = isMulticast && !isIPv6 ? "\(host)/\(ttl)" : host
        let ssrc = ssrc(forOutput: outputName)
        var lines = [
            "v=0",
            "o=- \(ssrc) 1 IN \(originFamily) \(origin)",
            "s=speakd \(outputName)",
            "c=IN \(family) \(connection)",
            "t=0 0",
            "a=tool:speakd",
            "a=recvonly",
            "m=audio \(port) RTP/AVP \(payloadType)",
        ]
        switch codec {
        case .pcmu, .pcma: lines.append("a=rtpmap:\(payloadType) \(codec.encodingName)/\(codec.clockRate)")
        case .l16: lines.append("a=rtpmap:\(payloadType) L16/\(codec.clockRate)/1")
        }
        lines.append("a=ptime:\(ptimeMilliseconds)")
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
