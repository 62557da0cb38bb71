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
    /// The longest `expiresAfter` the queue accepts, in seconds (one day).
    public static let maximumExpiresAfter: Double = 86_400
    /// The longest `requestId`, in characters.
    public static let maximumRequestIdLength = 128
    /// The longest `replaceGroup`, in characters.
    public static let maximumReplaceGroupLength = 64
    /// The most groups `replaces` may name.
    public static let maximumReplacesCount = 8

    /// What to say.
    public var utterance: Utterance
    /// How urgently it wants to be heard; `default` when absent.
    public var priority: AnnouncementPriority
    /// `false` interrupts a speaking announcement of lower or equal, non-high priority.
    public var queue: Bool
    /// Seconds it may wait before it starts; nil waits for ever.
    public var expiresAfter: Double?
    /// The chime played before the speech; absent on the wire is the priority's default.
    public var chime: ChimeChoice = .priorityDefault
    /// The chime played after the speech (`"chimeAfter"`); absent on the wire is the priority's
    /// default.
    public var chimeAfter: ChimeChoice = .priorityDefault
    /// How many times it is spoken, and the silence between; nil once.
    public var `repeat`: AnnouncementRepeat?
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
    /// A name shared by announcements of which only the newest matters (an arrival board, a
    /// progress report): accepting one finishes every other one of the same group in its
    /// output's queue, waiting or speaking, `discarded`. 1 to 64 characters; nil for none.
    public var replaceGroup: String?
    /// Accepted only to be dropped (`finished`, `discarded`) when its output's queue is busy
    /// (something speaking or waiting): for notices that are worth nothing later.
    public var dropIfBusy: Bool = false
    /// `"private"`: spoken only on an output configured private (`--output NAME=SPEC,private`),
    /// and its text is left out of every event, log line, listing and status page (docs/privacy.md).
    public var isPrivate: Bool = false
    /// Other replace groups this announcement replaces: accepting it finishes every announcement
    /// of these groups in its output's queue, waiting or speaking, `discarded` (a new arrival
    /// board replaces the delay notices still waiting). At most 8 names of 1 to 64 characters.
    public var replaces: [String] = []

    /// - Parameters:
    ///   - utterance: what to say.
    ///   - priority: how urgently it wants to be heard.
    ///   - queue: `false` to interrupt (Apple's non-queued announcement).
    ///   - expiresAfter: seconds it may wait before it starts, 0 … `maximumExpiresAfter`.
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
        self.chime = chime
        self.chimeAfter = chimeAfter
        self.repeat = `repeat`
        self.utterance = utterance
        self.priority = priority
        self.queue = queue
        self.expiresAfter = expiresAfter
        self.requestId = requestId
        self.output = output
    }

    /// Checks the values the queue itself interprets; the error names the field.
    public func validate() throws(SpeechInputError) {
        if let expiresAfter, !(expiresAfter.isFinite && expiresAfter >= 0 && expiresAfter <= Self.maximumExpiresAfter) {
            throw .outOfRange(
                field: "expiresAfter",
                "expiresAfter must be a number of seconds from 0 to \(Int(Self.maximumExpiresAfter)), not \(expiresAfter)"
            )
        }
        try `repeat`?.validate()
        for (field, choice) in [("chime", chime), ("chimeAfter", chimeAfter)] {
            if case .named(let name) = choice, name.isEmpty {
                throw .malformed(field: field, "\(field) must be a chime's name (GET /v1/chimes) or null")
            }
        }
        if let replaceGroup, !(1...Self.maximumReplaceGroupLength).contains(replaceGroup.unicodeScalars.count) {
            throw .outOfRange(
                field: "replaceGroup", "replaceGroup must have 1 to \(Self.maximumReplaceGroupLength) characters")
        }
        if replaces.count > Self.maximumReplacesCount {
            throw .outOfRange(
                field: "replaces",
                "replaces may name at most \(Self.maximumReplacesCount) groups, not \(replaces.count)")
        }
        for (index, group) in replaces.enumerated()
        where !(1...Self.maximumReplaceGroupLength).contains(group.unicodeScalars.count) {
            throw .outOfRange(
                field: "replaces[\(index)]",
                "a group's name in replaces must have 1 to \(Self.maximumReplaceGroupLength) characters")
        }
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
        do {
            priority = try container.decodeIfPresent(AnnouncementPriority.self, forKey: .priority) ?? .default
        } catch {
            throw SpeechInputError.malformed(field: "priority", "expected one of high, default, low")
        }
        queue = try container.decodeIfPresent(Bool.self, forKey: .queue) ?? true
        expiresAfter = try container.decodeIfPresent(Double.self, forKey: .expiresAfter)
        chime = try Self.decodeChime(container, .chime)
        chimeAfter = try Self.decodeChime(container, .chimeAfter)
        `repeat` = try container.decodeIfPresent(AnnouncementRepeat.self, forKey: .repeat)
        requestId = try container.decodeIfPresent(String.self, forKey: .requestId)
        do {
            replaceGroup = try container.decodeIfPresent(String.self, forKey: .replaceGroup)
        } catch {
            throw SpeechInputError.malformed(field: "replaceGroup", "expected a group's name, such as \"arrivals\"")
        }
        do {
            dropIfBusy = try container.decodeIfPresent(Bool.self, forKey: .dropIfBusy) ?? false
        } catch {
            throw SpeechInputError.malformed(field: "dropIfBusy", "expected true or false")
        }
        do {
            isPrivate = try container.decodeIfPresent(Bool.self, forKey: .isPrivate) ?? false
        } catch {
            throw SpeechInputError.malformed(field: "private", "expected true or false")
        }
        do {
            replaces = try container.decodeIfPresent([String].self, forKey: .replaces) ?? []
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
        try container.encode(priority, forKey: .priority)
        try container.encode(queue, forKey: .queue)
        try container.encodeIfPresent(expiresAfter, forKey: .expiresAfter)
        for (key, choice) in [(CodingKeys.chime, chime), (.chimeAfter, chimeAfter)] {
            switch choice {
            case .priorityDefault: break
            case .none: try container.encodeNil(forKey: key)
            case .named(let name): try container.encode(name, forKey: key)
            }
        }
        try container.encodeIfPresent(`repeat`, forKey: .repeat)
        try container.encodeIfPresent(requestId, forKey: .requestId)
        if let outputs {
            try container.encode(outputs, forKey: .output)
        } else {
            try container.encodeIfPresent(output, forKey: .output)
        }
        try container.encodeIfPresent(replaceGroup, forKey: .replaceGroup)
        if dropIfBusy { try container.encode(dropIfBusy, forKey: .dropIfBusy) }
        if isPrivate { try container.encode(isPrivate, forKey: .isPrivate) }
        if !replaces.isEmpty { try container.encode(replaces, forKey: .replaces) }
    }
}
