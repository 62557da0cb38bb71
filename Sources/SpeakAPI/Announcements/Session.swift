import FoundationEssentials
import SpeechModel

#if canImport(Glibc)
import Glibc
#endif

/// The body of `PUT /v1/session` (and of an MQTT session command): starts or changes the session
/// of one output, the preferences of the person at the terminal.
///
/// A key that is absent leaves the session's value as it is; `null` sets it back to its default
/// (multiplier 1, no language, no voice, no move, the default idle timeout). See docs/session.md.
public struct SessionRequest: Sendable, Hashable, Codable {
    /// The range of the `rate` multiplier: that of the `rate` attribute.
    public static let rateRange = SpeechAttributes.rateRange
    /// The range of the `volume` multiplier: that of the `volume` attribute.
    public static let volumeRange = SpeechAttributes.volumeRange
    /// The range of `idleTimeout`, in seconds.
    public static let idleTimeoutRange: ClosedRange<Double> = 1...3_600
    /// The idle timeout of a session that names none, in seconds: long enough for a person to
    /// read a screen, short enough that the next person does not inherit the session.
    public static let defaultIdleTimeout: Double = 120

    /// The output whose session this is; nil is the output called `default`.
    public var output: String?
    /// The id of the session to change: refused (404 naming `id`) when that session has ended,
    /// so a client never changes the next person's session by mistake.
    public var id: String?
    /// True ends the output's current session (`replaced`) and starts a new one.
    public var replace: Bool = false
    /// Multiplies the rate of every announcement; `.some(nil)` sets it back to 1.
    public var rate: Double??
    /// Multiplies the volume of every announcement; `.some(nil)` sets it back to 1.
    public var volume: Double??
    /// Fills in the language of announcements (and spans) that have none.
    public var language: LanguageTag??
    /// Fills in the voice of spans that name neither a voice nor a language.
    public var voice: String??
    /// Moves the output's announcements to this output (a headset).
    public var moveTo: String??
    /// Seconds without an announcement, repeat or change after which the session ends by itself.
    public var idleTimeout: Double??
    /// True makes every announcement of the session private (`"private": true`) while the
    /// headphones of the private output it is heard on are not known to be out; `.some(nil)`
    /// sets it back to false. The session's output (`moveTo`, else `output`) must be private.
    public var isPrivate: Bool??

    /// - Parameters: see the properties of the same names.
    public init(
        output: String? = nil, id: String? = nil, replace: Bool = false, rate: Double?? = nil,
        volume: Double?? = nil, language: LanguageTag?? = nil, voice: String?? = nil, moveTo: String?? = nil,
        idleTimeout: Double?? = nil, isPrivate: Bool?? = nil
    ) {
        self.output = output
        self.id = id
        self.replace = replace
        self.rate = rate
        self.volume = volume
        self.language = language
        self.voice = voice
        self.moveTo = moveTo
        self.idleTimeout = idleTimeout
        self.isPrivate = isPrivate
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case output, id, replace, rate, volume, language, voice, moveTo, idleTimeout
        case isPrivate = "private"
    }

    /// Every key a session body may have.
    public static let keys = Set(CodingKeys.allCases.map(\.rawValue))

    /// Checks every value; the error names the field.
    public func validate() throws(SpeechInputError) {
        if let rate = rate ?? nil, !(rate.isFinite && Self.rateRange.contains(rate)) {
            throw .outOfRange(field: "rate", value: rate, range: Self.rateRange)
        }
        if let volume = volume ?? nil, !(volume.isFinite && Self.volumeRange.contains(volume)) {
            throw .outOfRange(field: "volume", value: volume, range: Self.volumeRange)
        }
        if let timeout = idleTimeout ?? nil, !(timeout.isFinite && Self.idleTimeoutRange.contains(timeout)) {
            throw .outOfRange(field: "idleTimeout", value: timeout, range: Self.idleTimeoutRange)
        }
        for (field, value) in [("output", output), ("id", id), ("voice", voice ?? nil), ("moveTo", moveTo ?? nil)] {
            if let value, value.isEmpty || value.unicodeScalars.count > 128 {
                throw .malformed(field: field, "\(field) must have 1 to 128 characters")
            }
        }
    }

    /// Decodes a session body strictly: strict JSON, no unknown key, values range-checked.
    /// - Throws: `RequestBodyError` naming the field.
    public static func decode(json: Data) throws(RequestBodyError) -> SessionRequest {
        // An empty body is refused as an announcement's is: `{}` is the default output's session.
        guard !json.isEmpty else {
            throw .malformed(
                "the body is empty; send a JSON object ({} for the default output's session)", field: "body")
        }
        return try RequestBodyError.decodeStrictly(SessionRequest.self, from: json).value
    }

    public init(from decoder: any Decoder) throws {
        let unknown = try decoder.unknownKeys(known: Self.keys)
        if let key = unknown.first {
            throw SpeechInputError.malformed(
                field: key, "unknown key '\(key)'; a session has \(Self.keys.sorted().joined(separator: ", "))")
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func value<T: Decodable>(_ key: CodingKeys, _ expected: String) throws -> T?? {
            guard container.contains(key) else { return nil }
            if try container.decodeNil(forKey: key) { return .some(nil) }
            do {
                return .some(try container.decode(T.self, forKey: key))
            } catch {
                throw SpeechInputError.malformed(field: key.rawValue, "\(key.rawValue): expected \(expected)")
            }
        }
        // These have no default to set back: null is a mistake, not a request.
        func required<T: Decodable>(_ key: CodingKeys, _ expected: String) throws -> T? {
            switch try value(key, expected) as T?? {
            case .none: return nil
            case .some(.none):
                throw SpeechInputError.malformed(field: key.rawValue, "\(key.rawValue): expected \(expected), not null")
            case .some(.some(let value)): return value
            }
        }
        output = try required(.output, "the name of an output, such as \"headset\"")
        id = try required(.id, "a session id")
        replace = try required(.replace, "true or false") ?? false
        rate = try value(.rate, "a number")
        volume = try value(.volume, "a number")
        switch try value(.language, "a BCP 47 language tag") as String?? {
        case .none: language = nil
        case .some(.none): language = .some(nil)
        case .some(.some(let tag)): language = .some(try LanguageTag(tag, field: "language"))
        }
        voice = try value(.voice, "a voice's name")
        moveTo = try value(.moveTo, "the name of an output, such as \"headset\"")
        idleTimeout = try value(.idleTimeout, "a number of seconds")
        isPrivate = try value(.isPrivate, "true or false")
        try validate()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(output, forKey: .output)
        try container.encodeIfPresent(id, forKey: .id)
        if replace { try container.encode(replace, forKey: .replace) }
        func put<T: Encodable>(_ value: T??, _ key: CodingKeys) throws {
            switch value {
            case .none: break
            case .some(.none): try container.encodeNil(forKey: key)
            case .some(.some(let value)): try container.encode(value, forKey: key)
            }
        }
        try put(rate, .rate)
        try put(volume, .volume)
        try put(language.map { $0.map(\.description) }, .language)
        try put(voice, .voice)
        try put(moveTo, .moveTo)
        try put(idleTimeout, .idleTimeout)
        try put(isPrivate, .isPrivate)
    }
}

/// One output's session as `GET /v1/session` and `session` events show it.
public struct SessionStatus: Sendable, Hashable, Codable {
    /// Its id; a change by id (`PUT` with `id`) or an end by id names it.
    public var id: String
    /// The output whose announcements it applies to.
    public var output: String
    /// The rate multiplier, 1 when none was asked for.
    public var rate: Double
    /// The volume multiplier, 1 when none was asked for.
    public var volume: Double
    /// The language filled in where an announcement has none.
    public var language: String?
    /// The voice filled in where a span names neither a voice nor a language.
    public var voice: String?
    /// The output its announcements are moved to.
    public var moveTo: String?
    /// Seconds without activity after which it ends.
    public var idleTimeout: Double
    /// How many finished announcements of its output (and of `moveTo`) are remembered for `repeat`.
    public var remembered: Int?
    /// True when it makes every announcement private (`"private"` on the wire).
    public var isPrivate: Bool?
    /// True while the headphones of the private output it is heard on (`moveTo`, else `output`)
    /// are known to be out: its move and its privacy wait until they are plugged in again.
    public var headsetOut: Bool?

    private enum CodingKeys: String, CodingKey {
        case id, output, rate, volume, language, voice, moveTo, idleTimeout, remembered, headsetOut
        case isPrivate = "private"
    }

    /// - Parameters: see the properties of the same names.
    public init(
        id: String, output: String, rate: Double = 1, volume: Double = 1, language: String? = nil,
        voice: String? = nil, moveTo: String? = nil, idleTimeout: Double = SessionRequest.defaultIdleTimeout,
        remembered: Int? = nil, isPrivate: Bool? = nil, headsetOut: Bool? = nil
    ) {
        self.id = id
        self.output = output
        self.rate = rate
        self.volume = volume
        self.language = language
        self.voice = voice
        self.moveTo = moveTo
        self.idleTimeout = idleTimeout
        self.remembered = remembered
        self.isPrivate = isPrivate
        self.headsetOut = headsetOut
    }
}

/// The body of `GET /v1/session`: every output's session, in the order of the outputs.
public struct SessionList: Sendable, Hashable, Codable {
    public var sessions: [SessionStatus]

    /// - Parameter sessions: the sessions.
    public init(sessions: [SessionStatus]) {
        self.sessions = sessions
    }
}

/// What a `session` event says: which change, why a session ended, and the session.
public struct SessionChange: Sendable, Hashable, Codable {
    /// What happened to the session.
    public enum Kind: String, Sendable, Hashable, Codable {
        case started
        case changed
        case ended
    }

    /// Why a session ended.
    public enum EndReason: String, Sendable, Hashable, Codable {
        /// `DELETE /v1/session` (or `speak session end`, or an MQTT end command).
        case ended
        /// Its idle timeout passed.
        case idle
        /// A `PUT` with `replace` started a new one on its output.
        case replaced
    }

    public var change: Kind
    /// Set when `change` is `ended`.
    public var reason: EndReason?
    /// The session after the change (as it was, when it ended).
    public var session: SessionStatus

    /// - Parameters: see the properties of the same names.
    public init(change: Kind, reason: EndReason? = nil, session: SessionStatus) {
        self.change = change
        self.reason = reason
        self.session = session
    }
}

/// The body of an accepted `POST /v1/repeat`: the new announcements, oldest original first.
public struct RepeatResult: Sendable, Hashable, Codable {
    public var announcements: [AnnouncementAccepted]

    /// - Parameter announcements: the accepted repeats.
    public init(announcements: [AnnouncementAccepted]) {
        self.announcements = announcements
    }
}
