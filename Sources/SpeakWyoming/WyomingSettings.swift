import SpeechRendering

/// Where the Wyoming front listens: `tcp://HOST:PORT` or `unix://PATH`.
public enum WyomingAddress: Sendable, Hashable, CustomStringConvertible {
    case tcp(host: String, port: Int)
    case unix(path: String)

    /// The port Home Assistant's Wyoming integration expects by convention.
    public static let conventionalPort = 10_200

    /// Parses `tcp://HOST:PORT` (`[::1]:PORT` for IPv6; `tcp://:PORT` and `tcp://PORT` are
    /// loopback), `unix:///PATH`, or a bare `PORT`.
    public init?(_ text: String) {
        if text.hasPrefix("unix://") {
            let path = String(text.dropFirst("unix://".count))
            guard path.hasPrefix("/"), path.utf8.count < 108 else { return nil }
            self = .unix(path: path)
            return
        }
        guard text.hasPrefix("tcp://") || !text.contains("://") else { return nil }
        var rest = text.hasPrefix("tcp://") ? Substring(text.dropFirst("tcp://".count)) : Substring(text)
        var host = "127.0.0.1"
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            rest = rest.dropFirst()
        } else if let colon = rest.lastIndex(of: ":") {
            if colon != rest.startIndex { host = String(rest[..<colon]) }
            rest = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(rest), (1...65_535).contains(port) else { return nil }
        self = .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "tcp://[\(host)]:\(port)" : "tcp://\(host):\(port)"
        case .unix(let path): "unix://\(path)"
        }
    }
}

/// What the Wyoming front offers and its bounds.
public struct WyomingSettings: Sendable {
    /// The announce target (`--wyoming-satellite OUTPUT`).
    public struct Satellite: Sendable, Hashable {
        /// The output (or zone group) whose queue takes each announcement.
        public var output: String
        /// The satellite's name as Home Assistant shows it.
        public var name: String
        /// The format `info.snd` offers: Home Assistant sends 22050 Hz mono.
        public var format = AudioFormat(sampleRate: 22_050)

        public init(output: String, name: String? = nil) {
            self.output = output
            self.name = name ?? "speakd \(output)"
        }
    }

    /// speakd's version, as `info` gives it.
    public var version: String
    /// Where `info`'s attribution points (speakd has no public home; the voices are espeak-ng's and Piper's).
    public var url = "https://www.espeak-ng.org"
    /// The announce target, or nil for a TTS server only.
    public var satellite: Satellite?
    /// The most bytes of one text, whole or streamed.
    public var maxTextBytes = 64 << 10
    /// The most seconds of one announcement's audio.
    public var maxAnnounceSeconds = 600.0
    /// Frames in each `audio-chunk` sent.
    public var samplesPerChunk = 1_024
    /// The longest header line, in bytes.
    public var maxHeaderBytes = 64 << 10
    /// The most bytes of an event's data section.
    public var maxDataBytes = 1 << 20
    /// The most bytes of an event's payload.
    public var maxPayloadBytes = 1 << 20
    /// The most open connections; one more is closed at once.
    public var maxConnections = 256

    public init(version: String, satellite: Satellite? = nil) {
        self.version = version
        self.satellite = satellite
    }

    var readerLimits: WyomingEventReader.Limits {
        WyomingEventReader.Limits(
            maxHeaderBytes: maxHeaderBytes, maxDataBytes: maxDataBytes, maxPayloadBytes: maxPayloadBytes)
    }
}
