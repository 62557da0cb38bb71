import Foundation
import SpeakAPI
import SpeechModel

extension ScheduleDefinition {
    static let keys = ["announcement", "at", "missed", "name", "paused", "rrule", "start", "timeZone"]

    /// Decodes the body of `POST /v1/schedules` strictly: unknown keys, wrong types and
    /// conflicting fields are refused, naming the field.
    ///
    /// The body is read as every request body is (`StrictJSON`, then one decode): a key given
    /// twice at any depth is refused, and the announcement inside is decoded as
    /// `POST /v1/announcements` decodes its body.
    public init(json: Data) throws(ScheduleError) {
        try self.init(try Fields(json: json))
    }

    /// Decodes the body of `POST /v1/schedules` as `init(json:)` does, and the `id` it may name:
    /// 1 to 64 letters, digits, `.`, `_` or `-`, the first a letter or digit (a fleet names one
    /// so that every kiosk knows the schedule by the same id).
    public static func decode(creating json: Data) throws(ScheduleError) -> (
        id: String?, definition: ScheduleDefinition
    ) {
        var fields = try Fields(json: json)
        guard let value = fields.values.removeValue(forKey: "id") else { return (nil, try ScheduleDefinition(fields)) }
        guard case .string(let id) = value, isValidID(id) else {
            throw .invalid("id", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        }
        return (id, try ScheduleDefinition(fields))
    }

    /// Whether `id` may name a schedule. The first a letter or digit: "." and ".." would be
    /// paths no client reaches.
    static func isValidID(_ id: String) -> Bool {
        func isLetterOrDigit(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard (1...64).contains(id.utf8.count), let first = id.utf8.first, isLetterOrDigit(first) else { return false }
        return id.utf8.allSatisfy { isLetterOrDigit($0) || Array("._-".utf8).contains($0) }
    }

    /// The definition as canonical JSON (keys sorted; `at` in UTC, `start` at its zone's offset,
    /// `missed` and `paused` always given), which `init(json:)` reads back to an equal definition.
    public func encoded() -> Data {
        JSONValue.object(jsonObject()).encoded()
    }

    /// The definition as a JSON object's members, as `encoded()` writes them.
    public func jsonObject() -> [String: JSONValue] {
        var object: [String: JSONValue] = ["announcement": announcementJSON]
        switch timing {
        case .once(let at):
            object["at"] = .string(RFC3339.format(at))
        case .recurring(let rule, let start, let zone):
            object["rrule"] = .string(rule.description)
            object["start"] = .string(RFC3339.format(start, offset: zone.secondsFromGMT(for: start)))
            object["timeZone"] = .string(zone.identifier)
        }
        switch missed {
        case .skip: object["missed"] = .string("skip")
        case .speakWithin(let seconds): object["missed"] = .object(["speakWithin": .integer(Int64(seconds))])
        }
        object["paused"] = .bool(paused)
        if let name { object["name"] = .string(name) }
        return object
    }

    /// The definition with a JSON merge patch applied: each key of `patch` replaces the
    /// definition's, and `null` removes it.
    ///
    /// The result is checked like a new body, so switching from `at` to `rrule` needs `"at": null`
    /// next to `rrule`, `start` and `timeZone`. `announcement` is replaced whole, not merged.
    public func merging(patch: Data) throws(ScheduleError) -> ScheduleDefinition {
        let patch = try Fields(json: patch)
        var merged = Fields(values: jsonObject(), request: .success(request))
        for (key, value) in patch.values {
            merged.values[key] = value == .null ? nil : value
        }
        if patch.values["announcement"] != nil { merged.request = patch.request }
        return try ScheduleDefinition(merged)
    }

    /// A body's members as decoded, before they are checked.
    struct Fields: Decodable {
        var values: [String: JSONValue]
        /// The announcement decoded as a request, or why it is refused; nil when `announcement`
        /// is missing or not an object.
        var request: Result<AnnouncementRequest, ScheduleError>?

        init(values: [String: JSONValue], request: Result<AnnouncementRequest, ScheduleError>?) {
            self.values = values
            self.request = request
        }

        /// The strict check, then one decode.
        init(json: Data) throws(ScheduleError) {
            do {
                try StrictJSON.check(json)
            } catch {
                throw .strict(error)
            }
            do {
                self = try WireFormat.decoder().decode(Fields.self, from: json)
            } catch {
                throw .malformed("must be a JSON object")
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            var values: [String: JSONValue] = [:]
            for key in container.allKeys {
                values[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
            }
            self.values = values
            guard case .object = values["announcement"] else { return }
            do {
                request = .success(try container.decode(AnnouncementRequest.self, forKey: AnyCodingKey("announcement")))
            } catch let error as SpeechInputError {
                // The request names its fields from its own top.
                request = .failure(.announcement(error))
            } catch let error as DecodingError {
                // A decoding error's path starts at the body's top, with `announcement`.
                let converted = SpeechInputError.from(error)
                if let field = converted.field, field.hasPrefix("announcement.") {
                    request = .failure(.announcement(converted.renamed(field: String(field.dropFirst(13)))))
                } else {
                    request = .failure(.announcement(.malformed(field: nil, converted.message)))
                }
            } catch {
                request = .failure(.announcement(.malformed(field: nil, "cannot be decoded: \(error)")))
            }
        }
    }

    private init(_ fields: Fields) throws(ScheduleError) {
        if let unknown = fields.values.keys.filter({ !Self.keys.contains($0) }).sorted().first {
            throw .unknownField(unknown, known: Self.keys)
        }
        // An explicit null for an optional key is the same as leaving it out.
        let object = fields.values.filter { $0.value != .null }
        guard let announcement = object["announcement"] else {
            throw .invalid("announcement", "is required: the announcement to speak, as a JSON object")
        }
        let timing = try Self.timing(object)
        let missed = try object["missed"].map { value throws(ScheduleError) in try Self.missed(value) } ?? .skip
        let paused = try object["paused"].map { value throws(ScheduleError) in try Self.paused(value) } ?? false
        var name: String?
        if let value = object["name"] {
            guard case .string(let text) = value else { throw .invalid("name", "must be a string") }
            name = text
        }
        guard case .object = announcement, let decoded = fields.request else {
            throw .invalid("announcement", "must be a JSON object (the announcement to speak)")
        }
        let request: AnnouncementRequest
        switch decoded {
        case .success(let value): request = value
        case .failure(let error): throw error
        }
        if let name {
            guard !name.isEmpty else { throw .invalid("name", "is empty; leave it out instead") }
            guard name.count <= Self.maxNameLength else {
                throw .invalid("name", "is \(name.count) characters; at most \(Self.maxNameLength)")
            }
        }
        if case .speakWithin(let seconds) = missed, !(1...Self.maxSpeakWithin).contains(seconds) {
            throw .invalid("missed", "speakWithin must be a whole number of seconds from 1 to \(Self.maxSpeakWithin)")
        }
        self.announcementJSON = announcement
        self.request = request
        self.timing = timing
        self.missed = missed
        self.paused = paused
        self.name = name
    }

    /// `paused`: only `true` or `false` (not 0, 1 or a string).
    static func paused(_ value: JSONValue) throws(ScheduleError) -> Bool {
        guard case .bool(let paused) = value else { throw .invalid("paused", "must be true or false") }
        return paused
    }

    static func timing(_ object: [String: JSONValue]) throws(ScheduleError) -> Timing {
        switch (object["at"], object["rrule"]) {
        case (nil, nil):
            throw .invalid(
                "at", "give 'at' for one announcement or 'rrule' with 'start' and 'timeZone' for a recurring one")
        case (_?, _?):
            throw .invalid(
                "at", "give either 'at' or 'rrule', not both (to switch in a PATCH, set the other one to null)")
        case (let at?, nil):
            for key in ["start", "timeZone"] where object[key] != nil {
                throw .invalid(key, "only goes with 'rrule'; 'at' is already a full time")
            }
            return .once(at: try time(at, field: "at"))
        case (nil, let rrule?):
            guard case .string(let text) = rrule else {
                throw .invalid("rrule", "must be a string such as FREQ=DAILY;BYHOUR=17;BYMINUTE=45")
            }
            let rule = try RecurrenceRule(parsing: text)
            guard let start = object["start"] else {
                throw .invalid(
                    "start", "is required with 'rrule': when the rule begins, e.g. 2026-12-01T00:00:00+01:00")
            }
            guard let zoneValue = object["timeZone"] else {
                throw .invalid("timeZone", "is required with 'rrule': the zone its times are in, e.g. Europe/Lisbon")
            }
            guard case .string(let identifier) = zoneValue else {
                throw .invalid("timeZone", "must be a string naming a zone, e.g. Europe/Lisbon")
            }
            guard ZoneName.isWellFormed(identifier) else {
                throw .invalid(
                    "timeZone",
                    "must be an IANA zone name such as Europe/Lisbon or UTC (letters, digits, '.', '_', '-', '+' between slashes)"
                )
            }
            guard let zone = ZoneName.zone(identifier) else {
                throw .invalid("timeZone", "no time zone called '\(identifier)'")
            }
            return .recurring(rule: rule, start: try time(start, field: "start"), timeZone: zone)
        }
    }

    private static func time(_ value: JSONValue, field: String) throws(ScheduleError) -> Date {
        let example = "e.g. 2026-12-01T17:45:00+01:00 or 2026-12-01T16:45:00Z"
        guard case .string(let text) = value else {
            throw .invalid(field, "must be an RFC 3339 time with an offset, \(example)")
        }
        guard let date = RFC3339.parse(text) else {
            throw .invalid(field, "'\(text)' is not an RFC 3339 time with an offset or Z, \(example)")
        }
        return date
    }

    static func missed(_ value: JSONValue) throws(ScheduleError) -> MissedPolicy {
        let form = "must be \"skip\" or {\"speakWithin\": seconds}"
        if case .string(let text) = value {
            guard text == "skip" else { throw .invalid("missed", "'\(text)' is not known; \(form)") }
            return .skip
        }
        guard case .object(let object) = value else { throw .invalid("missed", form) }
        if let unknown = object.keys.filter({ $0 != "speakWithin" }).sorted().first {
            throw .invalid("missed", "has an unknown key '\(unknown)'; \(form)")
        }
        let range = "speakWithin must be a whole number of seconds from 1 to \(maxSpeakWithin)"
        // Only a plain integer is a number of seconds: a fraction, an exponent past 64 bits or
        // true and false are not.
        switch object["speakWithin"] {
        case .integer(let seconds):
            guard (1...Int64(maxSpeakWithin)).contains(seconds) else { throw .invalid("missed", range) }
            return .speakWithin(seconds: Int(seconds))
        case .number, .bool: throw .invalid("missed", range)
        default: throw .invalid("missed", form)
        }
    }
}
