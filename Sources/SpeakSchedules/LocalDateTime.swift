/// A wall-clock reading with no zone: a proleptic Gregorian date and a time to the second.
///
/// Recurrences are expanded in these and only then placed on the time line (`WallClock`), so
/// date arithmetic never sees a DST change.
struct LocalDateTime: Hashable, Comparable, Sendable {
    var year: Int
    var month: Int
    var day: Int
    var hour = 0
    var minute = 0
    var second = 0

    init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        (self.year, self.month, self.day) = (year, month, day)
        (self.hour, self.minute, self.second) = (hour, minute, second)
    }

    /// The reading `seconds` after 1970-01-01 00:00:00.
    init(secondsSinceEpoch seconds: Int) {
        let days = seconds.floorDivided(by: 86_400)
        let inDay = seconds - days * 86_400
        let date = CivilDay.date(ofDay: days)
        self.init(
            year: date.year, month: date.month, day: date.day, hour: inDay / 3600, minute: inDay / 60 % 60,
            second: inDay % 60)
    }

    /// Days since 1970-01-01 of the date part.
    var dayNumber: Int { CivilDay.dayNumber(year: year, month: month, day: day) }

    /// The reading as if it were UTC: seconds since 1970-01-01 00:00:00.
    var secondsSinceEpoch: Int { dayNumber * 86_400 + hour * 3600 + minute * 60 + second }

    /// Monday 0 … Sunday 6.
    var weekday: Int { CivilDay.weekday(ofDay: dayNumber) }

    static func < (a: LocalDateTime, b: LocalDateTime) -> Bool { a.secondsSinceEpoch < b.secondsSinceEpoch }
}

/// Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01), after Howard
/// Hinnant's `days_from_civil`: exact, branch-light, and independent of any time zone.
enum CivilDay {
    static func dayNumber(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let monthFromMarch = (month + 9) % 12
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func date(ofDay dayNumber: Int) -> (year: Int, month: Int, day: Int) {
        let z = dayNumber + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Monday 0 … Sunday 6 (1970-01-01 was a Thursday).
    static func weekday(ofDay dayNumber: Int) -> Int { (dayNumber + 3).floorModulo(7) }

    static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysIn(year: Int, month: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

extension Int {
    func floorDivided(by divisor: Int) -> Int {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    func floorModulo(_ divisor: Int) -> Int { self - floorDivided(by: divisor) * divisor }

    func ceilDivided(by divisor: Int) -> Int { -(-self).floorDivided(by: divisor) }
}
