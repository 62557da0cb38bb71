/// An RFC 5545 RRULE, in the subset speakd schedules by: FREQ, INTERVAL, BYDAY, BYHOUR, BYMINUTE,
/// BYSECOND, COUNT and UNTIL.
///
/// Parsing is strict: parts and values are upper case, each part appears once, and a part speakd
/// does not know is refused by name rather than ignored, so a rule never fires other than as
/// written. Expansion needs a start and a zone; see `ScheduleTimeline`.
public struct RecurrenceRule: Sendable, Hashable, CustomStringConvertible {
    /// How often the rule repeats before BY parts expand or limit it.
    public enum Frequency: String, Sendable, Hashable, CaseIterable {
        case secondly = "SECONDLY"
        case minutely = "MINUTELY"
        case hourly = "HOURLY"
        case daily = "DAILY"
        case weekly = "WEEKLY"
        case monthly = "MONTHLY"
        case yearly = "YEARLY"
    }

    /// A day of the week.
    public enum Weekday: Int, Sendable, Hashable, CaseIterable, Comparable {
        case monday, tuesday, wednesday, thursday, friday, saturday, sunday

        static let codes = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
        var code: String { Self.codes[rawValue] }

        public static func < (a: Weekday, b: Weekday) -> Bool { a.rawValue < b.rawValue }
    }

    /// A BYDAY entry: every such weekday of the period, or with an ordinal the nth one (negative
    /// counts from the end: -1FR is the last Friday).
    public struct WeekdayEntry: Sendable, Hashable, CustomStringConvertible {
        public let weekday: Weekday
        /// 1…53 or -53…-1; nil for every such weekday.
        public let ordinal: Int?

        public init(_ weekday: Weekday, ordinal: Int? = nil) {
            self.weekday = weekday
            self.ordinal = ordinal
        }

        public var description: String { (ordinal.map(String.init) ?? "") + weekday.code }
    }

    /// When the rule ends, as UNTIL was written.
    public enum Until: Sendable, Hashable {
        /// `YYYYMMDD`: through the end of that day in the schedule's zone.
        case date(year: Int, month: Int, day: Int)
        /// `YYYYMMDDTHHMMSS`: that wall-clock time in the schedule's zone.
        case local(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)
        /// `YYYYMMDDTHHMMSSZ`: that UTC time.
        case utc(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)
    }

    /// Most instances a COUNT may ask for when they must be enumerated one by one from the start;
    /// a sub-daily rule without limiting BY parts is computed arithmetically and may count higher.
    public static let maxEnumeratedCount = 100_000
    /// Largest INTERVAL: keeps every period's arithmetic far from overflow.
    public static let maxInterval = 1_000_000

    public let frequency: Frequency
    /// 1 or more.
    public let interval: Int
    public let byDay: [WeekdayEntry]
    /// Sorted, without repeats.
    public let byHour: [Int]
    public let byMinute: [Int]
    public let bySecond: [Int]
    public let count: Int?
    public let until: Until?

    static let knownParts = ["FREQ", "INTERVAL", "BYDAY", "BYHOUR", "BYMINUTE", "BYSECOND", "COUNT", "UNTIL"]

    /// Parses rule text such as `FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9;BYMINUTE=0`.
    ///
    /// A leading `RRULE:`, as calendar programs copy it, is accepted.
    public init(parsing text: String) throws(ScheduleError) {
        var body = Substring(text)
        if body.hasPrefix("RRULE:") { body = body.dropFirst(6) }
        guard !body.isEmpty else { throw .rule("empty rule; it needs at least FREQ, e.g. FREQ=DAILY") }
        var values: [String: Substring] = [:]
        for part in body.split(separator: ";", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw .rule("empty part (two ';' in a row, or one at an end)") }
            guard let equals = part.firstIndex(of: "=") else {
                throw .rule("part '\(part)' has no value (write NAME=VALUE)")
            }
            let name = String(part[..<equals])
            guard Self.knownParts.contains(name) else {
                throw .rule(
                    "unknown part '\(name)' (speakd knows \(Self.knownParts.joined(separator: ", ")))")
            }
            guard values[name] == nil else { throw .rule("\(name) is given twice") }
            let value = part[part.index(after: equals)...]
            guard !value.isEmpty else { throw .rule("\(name) has an empty value") }
            values[name] = value
        }
        guard let freq = values["FREQ"] else { throw .rule("FREQ is required, e.g. FREQ=DAILY") }
        guard let frequency = Frequency(rawValue: String(freq)) else {
            let names = Frequency.allCases.map(\.rawValue).joined(separator: ", ")
            throw .rule("FREQ '\(freq)' is not one of \(names) (upper case)")
        }
        self.frequency = frequency
        func list(_ part: String, _ range: ClosedRange<Int>, note: String = "") throws(ScheduleError) -> [Int] {
            guard let text = values[part] else { return [] }
            return try Self.numbers(text, part: part, in: range, note: note)
        }
        byHour = try list("BYHOUR", 0...23)
        byMinute = try list("BYMINUTE", 0...59)
        bySecond = try list("BYSECOND", 0...59, note: " (leap seconds are not scheduled)")
        byDay =
            try values["BYDAY"].map { text throws(ScheduleError) in try Self.weekdays(text, frequency: frequency) }
            ?? []
        interval =
            try values["INTERVAL"].map { text throws(ScheduleError) in
                try Self.number(text, part: "INTERVAL", in: 1...Self.maxInterval)
            } ?? 1
        count = try values["COUNT"].map { text throws(ScheduleError) in
            try Self.number(text, part: "COUNT", in: 1...Int(Int32.max))
        }
        until = try values["UNTIL"].map { text throws(ScheduleError) in try Self.until(text) }
        if count != nil && until != nil {
            throw .rule("COUNT and UNTIL together; give one (RFC 5545 does not allow both)")
        }
        if let count, count > Self.maxEnumeratedCount, !isArithmetic {
            throw .rule(
                "COUNT=\(count) is over \(Self.maxEnumeratedCount), speakd's limit for a rule whose slots are "
                    + "counted one by one (higher counts need FREQ=SECONDLY, MINUTELY or HOURLY without BYDAY "
                    + "and without BY parts that limit it)")
        }
    }

    /// The rule text, parts in a fixed order: FREQ, INTERVAL, COUNT or UNTIL, BYDAY, BYHOUR,
    /// BYMINUTE, BYSECOND.
    public var description: String {
        var parts = ["FREQ=\(frequency.rawValue)"]
        if interval != 1 { parts.append("INTERVAL=\(interval)") }
        if let count { parts.append("COUNT=\(count)") }
        if let until { parts.append("UNTIL=\(Self.text(of: until))") }
        if !byDay.isEmpty { parts.append("BYDAY=" + byDay.map(\.description).joined(separator: ",")) }
        for (name, list) in [("BYHOUR", byHour), ("BYMINUTE", byMinute), ("BYSECOND", bySecond)] where !list.isEmpty {
            parts.append(name + "=" + list.map(String.init).joined(separator: ","))
        }
        return parts.joined(separator: ";")
    }

    /// True when every period yields the same slots at the same offsets, so the nth slot is
    /// found by arithmetic: a sub-daily rule (stepped in elapsed time) with no BY part that limits.
    var isArithmetic: Bool {
        switch frequency {
        case .hourly: byDay.isEmpty && byHour.isEmpty
        case .minutely: byDay.isEmpty && byHour.isEmpty && byMinute.isEmpty
        case .secondly: byDay.isEmpty && byHour.isEmpty && byMinute.isEmpty && bySecond.isEmpty
        default: false
        }
    }
}

extension RecurrenceRule {
    private static func number(_ text: Substring, part: String, in range: ClosedRange<Int>, note: String = "")
        throws(ScheduleError) -> Int
    {
        guard !text.isEmpty, text.utf8.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }),
            let value = Int(text)
        else { throw .rule("\(part) '\(text)' is not a whole number") }
        guard range.contains(value) else {
            throw .rule("\(part) \(value) is out of range \(range.lowerBound)…\(range.upperBound)\(note)")
        }
        return value
    }

    private static func numbers(_ text: Substring, part: String, in range: ClosedRange<Int>, note: String = "")
        throws(ScheduleError) -> [Int]
    {
        var values = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw .rule("\(part) has an empty item") }
            values.insert(try number(item, part: part, in: range, note: note))
        }
        return values.sorted()
    }

    private static func weekdays(_ text: Substring, frequency: Frequency) throws(ScheduleError) -> [WeekdayEntry] {
        var entries: [WeekdayEntry] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw .rule("BYDAY has an empty item") }
            guard item.count >= 2, let index = Weekday.codes.firstIndex(of: String(item.suffix(2))) else {
                throw .rule("BYDAY '\(item)' is not a weekday (MO, TU, WE, TH, FR, SA, SU, upper case)")
            }
            let prefix = item.dropLast(2)
            var ordinal: Int?
            if !prefix.isEmpty {
                let sign = prefix.first == "-" ? -1 : 1
                let digits = prefix.first == "-" || prefix.first == "+" ? prefix.dropFirst() : prefix
                guard (1...2).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                    let value = Int(digits), (1...53).contains(value)
                else { throw .rule("BYDAY '\(item)' has an ordinal that is not 1…53 or -53…-1") }
                guard frequency == .monthly || frequency == .yearly else {
                    throw .rule("BYDAY '\(item)' has an ordinal, which only FREQ=MONTHLY or YEARLY allows")
                }
                if frequency == .monthly, value > 5 {
                    throw .rule("BYDAY '\(item)': a month has at most 5 of each weekday")
                }
                ordinal = sign * value
            }
            let entry = WeekdayEntry(Weekday(rawValue: index)!, ordinal: ordinal)
            if !entries.contains(entry) { entries.append(entry) }
        }
        return entries
    }

    private static func until(_ text: Substring) throws(ScheduleError) -> Until {
        let bytes = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let form = "UNTIL '\(text)' is not YYYYMMDD, YYYYMMDDTHHMMSS or YYYYMMDDTHHMMSSZ"
        guard bytes.count == 8 || bytes.count == 15 || bytes.count == 16, let year = digits(0..<4),
            let month = digits(4..<6), let day = digits(6..<8)
        else { throw .rule(form) }
        guard (1...12).contains(month), (1...CivilDay.daysIn(year: year, month: month)).contains(day) else {
            throw .rule("UNTIL '\(text)' is not a date")
        }
        if bytes.count == 8 { return .date(year: year, month: month, day: day) }
        guard bytes[8] == UInt8(ascii: "T"), let hour = digits(9..<11), let minute = digits(11..<13),
            let second = digits(13..<15), bytes.count == 15 || bytes[15] == UInt8(ascii: "Z")
        else { throw .rule(form) }
        guard hour < 24, minute < 60, second < 60 else { throw .rule("UNTIL '\(text)' is not a time of day") }
        return bytes.count == 16
            ? .utc(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            : .local(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    private static func text(of until: Until) -> String {
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        switch until {
        case .date(let y, let m, let d):
            return pad(y, 4) + pad(m, 2) + pad(d, 2)
        case .local(let y, let m, let d, let h, let mi, let s):
            return pad(y, 4) + pad(m, 2) + pad(d, 2) + "T" + pad(h, 2) + pad(mi, 2) + pad(s, 2)
        case .utc(let y, let m, let d, let h, let mi, let s):
            return pad(y, 4) + pad(m, 2) + pad(d, 2) + "T" + pad(h, 2) + pad(mi, 2) + pad(s, 2) + "Z"
        }
    }
}
