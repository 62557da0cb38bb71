import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// An announcement as a client asks for it, before the queue gives it an id; also the body of
/// `POST /v1/announcements`.
///
/// On the wire this is one flat JSON object: the utterance fields (`text` or `spans`, `ssml`,
/// `language`, `pitch`, …) next to `priority`, `queue`, `expiresAfter` and `output`.
public struct AnnouncementRequest: Sendable, Hashable, Codable {
    /// The longest `requestId`, in characters.
    public static let maximumRequestIdLength = 128

    /// What to say.
    public var utterance: Utterance
    /// How the queue delivers it: priority, interruption, expiry, chimes, repeats, replace groups,
    /// privacy. On the wire its keys stand flat beside the utterance's (`"priority"`, `"queue"`,
    /// `"private"`, …).
    public var delivery: AnnouncementDelivery
    /// The sender's name for this request, so a request delivered twice (an MQTT message
    /// redelivered after a reconnect) is spoken once; 1 to 128 Unicode scalars (JSON Schema's
    /// `maxLength`). The HTTP API ignores it.
    public var requestId: String?
    /// The named output (`--output NAME=SPEC`) that speaks it; nil is the output called `default`.
    /// The daemon answers an output it does not have with 422 naming `output`.
    public var output: String?
    /// The outputs (zones) of one announcement heard in several at once: `"output"` given as an
    /// array (`["platform1", "platform2"]`), or naming a zone group; nil when `output` names one.
    /// Each name at most once, at least one. The daemon answers a name it does not have with 422
    /// naming `output[INDEX]`.
    public var outputs: [String]?

    /// - Parameters:
    ///   - utterance: what to say.
    ///   - priority: how urgently it wants to be heard.
    ///   - queue: `false` to interrupt (Apple's non-queued announcement).
    ///   - expiresAfter: seconds it may wait before it starts, 0 …
    ///     `AnnouncementDelivery.maximumExpiresAfter`.
    ///   - chime: the chime before the speech.
    ///   - chimeAfter: the chime after the speech.
    ///   - repeat: how many times it is spoken; nil once.
    ///   - requestId: the sender's own id, which makes a redelivered MQTT message speak once.
    ///   - output: the named output that speaks it; nil for `default`.
    public init(
        utterance: Utterance, priority: AnnouncementPriority = .default, queue: Bool = true,
        expiresAfter: Double? = nil, chime: ChimeChoice = .priorityDefault,
        chimeAfter: ChimeChoice = .priorityDefault, repeat: AnnouncementRepeat? = nil,
        requestId: String? = nil, output: String? = nil
    ) {
        self.init(
            utterance: utterance,
            delivery: AnnouncementDelivery(
                priority: priority, queue: queue, expiresAfter: expiresAfter, chime: chime, chimeAfter: chimeAfter,
                repeat: `repeat`),
            requestId: requestId, output: output)
    }

    /// - Parameters:
    ///   - utterance: what to say.
    ///   - delivery: how the queue delivers it.
    ///   - requestId: the sender's own id, which makes a redelivered MQTT message speak once.
    ///   - output: the named output that speaks it; nil for `default`.
    public init(
        utterance: Utterance, delivery: AnnouncementDelivery, requestId: String? = nil, output: String? = nil
    ) {
        self.utterance = utterance
        self.delivery = delivery
        self.requestId = requestId
        self.output = output
    }

    /// Checks the values the queue itself interprets; the error names the field.
    public func validate() throws(SpeechInputError) {
        try delivery.validate()
        if let outputs {
            if outputs.isEmpty {
                throw .outOfRange(field: "output", "output must name at least one output")
            }
            for (index, name) in outputs.enumerated() where outputs[..<index].contains(name) {
                throw .outOfRange(field: "output[\(index)]", "output names '\(name)' twice")
            }
        }
        if let requestId, !(1...Self.maximumRequestIdLength).contains(requestId.unicodeScalars.count) {
            throw .outOfRange(
                field: "requestId", "requestId must have 1 to \(Self.maximumRequestIdLength) characters")
        }
    }

    /// Decodes a request body: strict JSON (`StrictJSON`), no unknown key, values range-checked,
    /// and the text and span limits. This is the one decode of a request body: the daemon's
    /// intake, `speak --json` and the fuzz targets all call it.
    ///
    /// - Parameters:
    ///   - json: the body's bytes.
    ///   - limits: the most characters and spans; an SSML body's limit names `ssml`.
    /// - Throws: `RequestBodyError` naming the field (`pich: unknown key 'pich'; …`).
    public static func decode(
        json: Data, limits: Utterance.Limits = .default
    ) throws(RequestBodyError) -> AnnouncementRequest {
        try decodeNamingText(json: json, limits: limits).request
    }

    /// A request as its body gave it: the decoded request, the wire field that carries its text,
    /// and the keys the body had at its top level.
    public struct Decoded: Sendable {
        public var request: AnnouncementRequest
        /// `text`, `spans` or `ssml`: what a limit found later (the audio `POST /v1/speech`
        /// renders) names.
        public var textField: String
        /// The body's own keys, for a route that honours only some of them to name the rest.
        public var keys: [String]
    }

    /// `decode(json:limits:)`, with the wire field that carries the text and the body's keys.
    public static func decodeNamingText(
        json: Data, limits: Utterance.Limits = .default
    ) throws(RequestBodyError) -> Decoded {
        guard !json.isEmpty else {
            throw .malformed("the body is empty; expected a JSON object with text or spans", field: "body")
        }
        let (decoded, topLevelKeys) = try RequestBodyError.decodeStrictly(AnnouncementRequest.self, from: json)
        // The limits name the field the client wrote: an SSML document becomes spans.
        let usedSSML = topLevelKeys.contains("ssml")
        let usedSequence = topLevelKeys.contains("sequence")
        let spans = decoded.utterance.spans.count
        if spans > limits.maxSpans {
            throw .tooLarge(
                "\(spans) spans is more than the limit of \(limits.maxSpans)",
                field: usedSequence ? "sequence" : usedSSML ? "ssml" : "spans")
        }
        let textField = usedSequence ? "sequence" : usedSSML ? "ssml" : spans == 1 ? "text" : "spans"
        let length = decoded.utterance.text.count
        if length > limits.maxTextLength {
            throw .tooLarge(
                "\(length) characters of text is more than the limit of \(limits.maxTextLength)", field: textField)
        }
        return Decoded(request: decoded, textField: textField, keys: topLevelKeys)
    }

    private enum CodingKeys: String, CodingKey {
        case priority, queue, expiresAfter, chime, chimeAfter, `repeat`, requestId, output, replaceGroup, dropIfBusy,
            replaces
        case isPrivate = "private"
    }

    /// Every key a request body may have: the utterance's and the queue's.
    public static let keys: Set<String> = [
        "text", "spans", "ssml", "sequence", "sequenceGap", "language", "pitch", "rate", "volume", "punctuation",
        "spellOut", "voice", "sentenceStarts", "paragraphStarts", "priority", "queue", "expiresAfter",
        "chime", "chimeAfter", "repeat", "requestId", "output", "replaceGroup", "dropIfBusy",
        "private",
        "replaces",
    ]

    public init(from decoder: any Decoder) throws {
        // A misspelt key ("priorty") would otherwise be ignored without a word.
        let unknown = try decoder.unknownKeys(known: Self.keys)
        if let key = unknown.first {
            throw SpeechInputError.malformed(
                field: StrictJSON.memberPath("", key),
                "unknown key '\(key)'; a request has \(Self.keys.sorted().joined(separator: ", "))")
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var delivery = AnnouncementDelivery()
        do {
            delivery.priority = try container.decodeIfPresent(AnnouncementPriority.self, forKey: .priority) ?? .default
        } catch {
            throw SpeechInputError.malformed(field: "priority", "expected one of high, default, low")
        }
        delivery.queue = try container.decodeIfPresent(Bool.self, forKey: .queue) ?? true
        delivery.expiresAfter = try container.decodeIfPresent(Double.self, forKey: .expiresAfter)
        delivery.chime = try Self.decodeChime(container, .chime)
        delivery.chimeAfter = try Self.decodeChime(container, .chimeAfter)
        delivery.repeat = try container.decodeIfPresent(AnnouncementRepeat.self, forKey: .repeat)
        requestId = try container.decodeIfPresent(String.self, forKey: .requestId)
        do {
            delivery.replaceGroup = try container.decodeIfPresent(String.self, forKey: .replaceGroup)
        } catch {
            throw SpeechInputError.malformed(field: "replaceGroup", "expected a group's name, such as \"arrivals\"")
        }
        do {
            delivery.dropIfBusy = try container.decodeIfPresent(Bool.self, forKey: .dropIfBusy) ?? false
        } catch {
            throw SpeechInputError.malformed(field: "dropIfBusy", "expected true or false")
        }
        do {
            delivery.isPrivate = try container.decodeIfPresent(Bool.self, forKey: .isPrivate) ?? false
        } catch {
            throw SpeechInputError.malformed(field: "private", "expected true or false")
        }
        do {
            delivery.replaces = try container.decodeIfPresent([String].self, forKey: .replaces) ?? []
        } catch {
            throw SpeechInputError.malformed(
                field: "replaces", "expected a list of groups' names, such as [\"delays\"]")
        }
        do {
            output = try container.decodeIfPresent(String.self, forKey: .output)
        } catch {
            do {
                outputs = try container.decode([String].self, forKey: .output)
            } catch {
                throw SpeechInputError.malformed(
                    field: "output",
                    "expected the name of an output, such as \"headset\", or a list of them, such as [\"platform1\", \"platform2\"]"
                )
            }
        }
        self.delivery = delivery
        utterance = try Utterance(from: decoder)
        try validate()
    }

    /// A chime key: absent is the priority's default, `null` none, a string that chime.
    private static func decodeChime(
        _ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys
    ) throws -> ChimeChoice {
        guard container.contains(key) else { return .priorityDefault }
        if try container.decodeNil(forKey: key) { return ChimeChoice.none }
        do {
            return .named(try container.decode(String.self, forKey: key))
        } catch {
            throw SpeechInputError.malformed(
                field: key.stringValue, "\(key.stringValue) must be a chime's name (GET /v1/chimes) or null")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        try utterance.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(delivery.priority, forKey: .priority)
        try container.encode(delivery.queue, forKey: .queue)
        try container.encodeIfPresent(delivery.expiresAfter, forKey: .expiresAfter)
        for (key, choice) in [(CodingKeys.chime, delivery.chime), (.chimeAfter, delivery.chimeAfter)] {
            switch choice {
            case .priorityDefault: break
            case .none: try container.encodeNil(forKey: key)
            case .named(let name): try container.encode(name, forKey: key)
            }
        }
        try container.encodeIfPresent(delivery.repeat, forKey: .repeat)
        try container.encodeIfPresent(requestId, forKey: .requestId)
        if let outputs {
            try container.encode(outputs, forKey: .output)
        } else {
            try container.encodeIfPresent(output, forKey: .output)
        }
        try container.encodeIfPresent(delivery.replaceGroup, forKey: .replaceGroup)
        if delivery.dropIfBusy { try container.encode(delivery.dropIfBusy, forKey: .dropIfBusy) }
        if delivery.isPrivate { try container.encode(delivery.isPrivate, forKey: .isPrivate) }
        if !delivery.replaces.isEmpty { try container.encode(delivery.replaces, forKey: .replaces) }
    }
}
