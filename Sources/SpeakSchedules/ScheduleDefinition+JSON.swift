import Foundation

extension ScheduleDefinition {
    static let keys = ["announcement", "at", "missed", "name", "rrule", "start", "timeZone"]

    /// Decodes the body of `POST /v1/schedules` strictly: unknown keys, wrong types and
    /// conflicting fields are refused, naming the field.
    public init(json: Data) throws(ScheduleError) {
        try self.init(object: try Self.object(from: json))
    }

    /// The definition as canonical JSON (keys sorted; `at` in UTC, `start` at its zone's offset),
    /// which `init(json:)` reads back to an equal definition.
    public func encoded() -> Data {
        // The object holds only strings, numbers and the announcement, which was a valid object.
        try! JSONSerialization.data(withJSONObject: jsonObject(), options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// The definition with a JSON merge patch applied: each key of `patch` replaces the
    /// definition's, and `null` removes it.
    ///
    /// The result is checked like a new body, so switching from `at` to `rrule` needs `"at": null`
    /// next to `rrule`, `start` and `timeZone`. `announcement` is replaced whole, not merged.
    public func merging(patch: Data) throws(ScheduleError) -> ScheduleDefinition {
        var merged = jsonObject()
        for (key, value) in try Self.object(from: patch) {
            merged[key] = value is NSNull ? nil : value
        }
        return try ScheduleDefinition(object: merged)
    }

    private static func object(from json: Data) throws(ScheduleError) -> [String: Any] {
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])
        } catch {
            throw .malformed("is not JSON")
        }
        guard let object = value as? [String: Any] else { throw .malformed("must be a JSON object") }
        return object
    }

    private init(object: [String: Any]) throws(ScheduleError) {
        if let unknown = object.keys.filter({ !Self.keys.contains($0) }).sorted().first {
            throw .unknownField(unknown, known: Self.keys)
        }
        // An explicit null for an optional key is the same as leaving it out.
        let object = object.filter { !($0.value is NSNull) }
        guard let announcement = object["announcement"] else {
            throw .invalid("announcement", "is required: the announcement to speak, as a JSON object")
        }
        let timing = try Self.timing(object)
        let missed = try object["missed"].map { value throws(ScheduleError) in try Self.missed(value) } ?? .skip
        var name: String?
        if let value = object["name"] {
            guard let text = value as? String else { throw .invalid("name", "must be a string") }
            name = text
        }
        try self.init(announcementObject: announcement, timing: timing, missed: missed, name: name)
    }

    private static func timing(_ object: [String: Any]) throws(ScheduleError) -> Timing {
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
            guard let text = rrule as? String else {
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
            guard let identifier = zoneValue as? String else {
                throw .invalid("timeZone", "must be a string naming a zone, e.g. Europe/Lisbon")
            }
            guard let zone = TimeZone(identifier: identifier) else {
                throw .invalid("timeZone", "no time zone called '\(identifier)'")
            }
            return .recurring(rule: rule, start: try time(start, field: "start"), timeZone: zone)
        }
    }

    private static func time(_ value: Any, field: String) throws(ScheduleError) -> Date {
        let example = "e.g. 2026-12-01T17:45:00+01:00 or 2026-12-01T16:45:00Z"
        guard let text = value as? String else {
            throw .invalid(field, "must be an RFC 3339 time with an offset, \(example)")
        }
        guard let date = RFC3339.parse(text) else {
            throw .invalid(field, "'\(text)' is not an RFC 3339 time with an offset or Z, \(example)")
        }
        return date
    }

    private static func missed(_ value: Any) throws(ScheduleError) -> MissedPolicy {
        let form = "must be \"skip\" or {\"speakWithin\": seconds}"
        if let text = value as? String {
            guard text == "skip" else { throw .invalid("missed", "'\(text)' is not known; \(form)") }
            return .skip
        }
        guard let object = value as? [String: Any] else { throw .invalid("missed", form) }
        if let unknown = object.keys.filter({ $0 != "speakWithin" }).sorted().first {
            throw .invalid("missed", "has an unknown key '\(unknown)'; \(form)")
        }
        let range = "speakWithin must be a whole number of seconds from 1 to \(maxSpeakWithin)"
        guard let number = object["speakWithin"] as? NSNumber else { throw .invalid("missed", form) }
        // JSON true and false arrive as NSNumber too, with type encoding `c`; numbers with a
        // fraction or an exponent arrive as `d`. Only a plain integer is a number of seconds.
        guard ["i", "l", "q", "s"].contains(String(cString: number.objCType)) else { throw .invalid("missed", range) }
        guard (1...Double(maxSpeakWithin)).contains(number.doubleValue) else { throw .invalid("missed", range) }
        return .speakWithin(seconds: number.intValue)
    }

    private func jsonObject() -> [String: Any] {
        var object: [String: Any] = [
            "announcement": (try? JSONSerialization.jsonObject(with: announcement)) ?? [String: Any]()
        ]
        switch timing {
        case .once(let at):
            object["at"] = RFC3339.format(at)
        case .recurring(let rule, let start, let zone):
            object["rrule"] = rule.description
            object["start"] = RFC3339.format(start, offset: zone.secondsFromGMT(for: start))
            object["timeZone"] = zone.identifier
        }
        switch missed {
        case .skip: object["missed"] = "skip"
        case .speakWithin(let seconds): object["missed"] = ["speakWithin": seconds]
        }
        if let name { object["name"] = name }
        return object
    }
}
