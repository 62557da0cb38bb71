import Foundation

/// RFC 3339 timestamps with an explicit offset, as `at` and `start` are written.
enum RFC3339 {
    /// The instant of `text`, or nil when it is not `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
    ///
    /// An offset is required: a bare local time would be read in whatever zone the daemon runs
    /// in, and a schedule must not move with the machine.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
                    return nil
                }
                value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == UInt8(ascii: "-"), let month = number(5..<7),
            bytes[7] == UInt8(ascii: "-"), let day = number(8..<10), bytes[10] | 0x20 == UInt8(ascii: "t"),
            let hour = number(11..<13), bytes[13] == UInt8(ascii: ":"), let minute = number(14..<16),
            bytes[16] == UInt8(ascii: ":"), let second = number(17..<19)
        else { return nil }
        guard (1...12).contains(month), (1...CivilDay.daysIn(year: year, month: month)).contains(day),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            let digits = bytes[(index + 1)...].prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            guard !digits.isEmpty, let value = Double("0." + String(decoding: digits, as: UTF8.self)) else {
                return nil
            }
            fraction = value
            index += 1 + digits.count
        }
        let offset: Int
        if index == bytes.count - 1, bytes[index] | 0x20 == UInt8(ascii: "z") {
            offset = 0
        } else if index == bytes.count - 6, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
            let hours = number((index + 1)..<(index + 3)), bytes[index + 3] == UInt8(ascii: ":"),
            let minutes = number((index + 4)..<(index + 6)), hours < 24, minutes < 60
        {
            offset = (hours * 3600 + minutes * 60) * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        let local = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        return Date(timeIntervalSince1970: Double(local.secondsSinceEpoch - offset) + fraction)
    }

    /// `date` written at `offset` seconds east of UTC, `Z` for 0, with microseconds when it has any.
    static func format(_ date: Date, offset: Int = 0) -> String {
        let whole = Int(date.timeIntervalSince1970.rounded(.down))
        var micros = Int(((date.timeIntervalSince1970 - Double(whole)) * 1_000_000).rounded())
        var seconds = whole
        if micros == 1_000_000 { (seconds, micros) = (seconds + 1, 0) }
        let local = LocalDateTime(secondsSinceEpoch: seconds + offset)
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        var text = "\(pad(local.year, 4))-\(pad(local.month, 2))-\(pad(local.day, 2))"
        text += "T\(pad(local.hour, 2)):\(pad(local.minute, 2)):\(pad(local.second, 2))"
        if micros != 0 {
            var fraction = pad(micros, 6)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        if offset == 0 { return text + "Z" }
        let sign = offset < 0 ? "-" : "+"
        return text + "\(sign)\(pad(abs(offset) / 3600, 2)):\(pad(abs(offset) / 60 % 60, 2))"
    }
}
