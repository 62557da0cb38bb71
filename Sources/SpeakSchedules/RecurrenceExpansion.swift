import Foundation

/// A recurrence rule bound to its start and zone: the slots it yields, in order, as seconds since
/// the epoch.
///
/// Sub-daily frequencies (SECONDLY, MINUTELY, HOURLY) step in elapsed time, so "every 5 minutes"
/// stays 5 minutes apart across a DST change, and their BY parts look at the wall clock of each
/// slot. DAILY and longer step in wall-clock dates, and each day's times are placed on the time
/// line by `WallClock` (the RFC 5545 gap and fall-back rules).
struct RecurrenceExpansion: Sendable {
    /// Consecutive periods without a slot (for sub-daily rules, consecutive skips) after which a
    /// rule is taken as having no more slots: bounds the work for a rule that can never match,
    /// such as DAILY;INTERVAL=7;BYDAY=MO from a Tuesday.
    static let maxEmptyPeriods = 100_000
    /// Queries are clamped to about ±30,000 years so that no arithmetic overflows.
    static let horizon = 1_000_000_000_000

    let rule: RecurrenceRule
    let clock: WallClock
    /// The start, rounded up to its next second when it has a fraction: slots fall on whole
    /// seconds, and none before the start.
    let start: Int
    let startReading: LocalDateTime
    /// The last second a slot may fall on, from UNTIL.
    let untilLimit: Int?

    /// Sub-daily: the length of one period, the origin of period 0 (the start of its wall-clock
    /// hour or minute) and the sorted offsets of the period's slots from its origin.
    private let step: Int
    private let base: Int
    private let offsets: [Int]
    /// Sub-daily arithmetic rules: how many of period 0's slots fall before the start.
    private let droppedInFirstPeriod: Int

    /// DAILY and longer: the sorted seconds of the day at which the rule's days have slots.
    private let times: [Int]
    private let weekdays: Set<Int>

    init(rule: RecurrenceRule, start: Date, zone: TimeZone) {
        self.rule = rule
        clock = WallClock(zone: zone)
        let start = start.timeIntervalSince1970.wholeSecondsRoundedUp
        self.start = start
        let reading = clock.reading(at: start)
        startReading = reading
        weekdays = Set(rule.byDay.map(\.weekday.rawValue))

        let hours = rule.byHour.isEmpty ? [reading.hour] : rule.byHour
        let minutes = rule.byMinute.isEmpty ? [reading.minute] : rule.byMinute
        let seconds = rule.bySecond.isEmpty ? [reading.second] : rule.bySecond
        switch rule.frequency {
        case .hourly:
            step = 3600 * rule.interval
            base = start - reading.minute * 60 - reading.second
            offsets = minutes.flatMap { m in seconds.map { m * 60 + $0 } }.sorted()
            times = []
        case .minutely:
            step = 60 * rule.interval
            base = start - reading.second
            offsets = seconds
            times = []
        case .secondly:
            step = rule.interval
            base = start
            offsets = [0]
            times = []
        case .daily, .weekly, .monthly, .yearly:
            step = 0
            base = start
            offsets = []
            times = hours.flatMap { h in minutes.flatMap { m in seconds.map { h * 3600 + m * 60 + $0 } } }.sorted()
        }
        let origin = base
        droppedInFirstPeriod = offsets.count { origin + $0 < start }

        switch rule.until {
        case nil:
            untilLimit = nil
        case .date(let y, let m, let d)?:
            let nextDay = CivilDay.dayNumber(year: y, month: m, day: d) + 1
            untilLimit = clock.instant(of: LocalDateTime(secondsSinceEpoch: nextDay * 86_400)) - 1
        case .local(let y, let m, let d, let h, let mi, let s)?:
            untilLimit = clock.instant(of: LocalDateTime(year: y, month: m, day: d, hour: h, minute: mi, second: s))
        case .utc(let y, let m, let d, let h, let mi, let s)?:
            untilLimit = LocalDateTime(year: y, month: m, day: d, hour: h, minute: mi, second: s).secondsSinceEpoch
        }
    }

    /// The slots after `time` (all of them when nil), in increasing order.
    func slots(after time: Int?) -> Slots { Slots(self, after: time.map { $0.clamped(to: Self.horizon) }) }

    var isSubDaily: Bool { step > 0 }

    // MARK: Sub-daily periods

    /// The slot of an arithmetic rule with index `index` (0 is the first at or after the start).
    fileprivate func arithmeticSlot(_ index: Int) -> Int {
        let position = index + droppedInFirstPeriod
        return base + position / offsets.count * step + offsets[position % offsets.count]
    }

    /// The index of an arithmetic rule's first slot after `time`.
    fileprivate func arithmeticIndex(after time: Int) -> Int {
        let period = (time - base).floorDivided(by: step)
        let origin = base + period * step
        let inPeriod = offsets.firstIndex { origin + $0 > time } ?? offsets.count
        return max(0, period * offsets.count + inPeriod - droppedInFirstPeriod)
    }

    /// The first sub-daily period that can hold a slot after `time`.
    fileprivate func subDailyPeriod(after time: Int) -> Int {
        max(0, (time - base - (offsets.last ?? 0)).floorDivided(by: step))
    }

    /// The slots of sub-daily period `period` that pass the rule's limits, and the next period
    /// worth looking at: on a miss, the first one past the wall-clock day, hour or minute that
    /// failed, so a sparse rule does not visit every second.
    fileprivate func subDailySlots(inPeriod period: Int) -> (slots: [Int], next: Int) {
        let origin = base + period * step
        var slots: [Int] = []
        var failed: (time: Int, reading: LocalDateTime)?
        for offset in offsets {
            let time = origin + offset
            let reading = clock.reading(at: time)
            if passesLimits(reading) { slots.append(time) } else { failed = (time, reading) }
        }
        guard slots.isEmpty, let (time, reading) = failed else { return (slots, period + 1) }
        let resume: Int
        if !weekdays.isEmpty && !weekdays.contains(reading.weekday) {
            resume = clock.instant(of: LocalDateTime(secondsSinceEpoch: (reading.dayNumber + 1) * 86_400))
        } else if !rule.byHour.isEmpty && !rule.byHour.contains(reading.hour) {
            let hourStart = reading.secondsSinceEpoch - reading.minute * 60 - reading.second
            resume = clock.instant(of: LocalDateTime(secondsSinceEpoch: hourStart + 3600))
        } else if rule.frequency != .hourly, !rule.byMinute.isEmpty, !rule.byMinute.contains(reading.minute) {
            resume = time - reading.second + 60
        } else {
            return (slots, period + 1)
        }
        return (slots, max(period + 1, (max(resume, time + 1) - base - offsets.last!).ceilDivided(by: step)))
    }

    private func passesLimits(_ reading: LocalDateTime) -> Bool {
        if !weekdays.isEmpty && !weekdays.contains(reading.weekday) { return false }
        if !rule.byHour.isEmpty && !rule.byHour.contains(reading.hour) { return false }
        switch rule.frequency {
        case .minutely:
            return rule.byMinute.isEmpty || rule.byMinute.contains(reading.minute)
        case .secondly:
            return (rule.byMinute.isEmpty || rule.byMinute.contains(reading.minute))
                && (rule.bySecond.isEmpty || rule.bySecond.contains(reading.second))
        default:
            return true
        }
    }

    // MARK: Daily and longer periods

    /// The first DAILY-or-longer period that can hold a slot after `time`; one early, since
    /// placing a time in a DST gap can move a slot past midnight.
    fileprivate func calendarPeriod(after time: Int) -> Int {
        let reading = clock.reading(at: time)
        let period: Int
        switch rule.frequency {
        case .daily:
            period = (reading.dayNumber - startReading.dayNumber).floorDivided(by: rule.interval)
        case .weekly:
            let weeks = (monday(of: reading.dayNumber) - monday(of: startReading.dayNumber)) / 7
            period = weeks.floorDivided(by: rule.interval)
        case .monthly:
            let months = (reading.year - startReading.year) * 12 + reading.month - startReading.month
            period = months.floorDivided(by: rule.interval)
        default:
            period = (reading.year - startReading.year).floorDivided(by: rule.interval)
        }
        return max(0, period - 1)
    }

    private func monday(of day: Int) -> Int { day - CivilDay.weekday(ofDay: day) }

    /// The first day of calendar period `period`, whether or not it has slots.
    fileprivate func firstDay(ofPeriod period: Int) -> Int {
        let startDay = startReading.dayNumber
        switch rule.frequency {
        case .daily:
            return startDay + period * rule.interval
        case .weekly:
            return monday(of: startDay) + 7 * period * rule.interval
        case .monthly:
            let months = startReading.year * 12 + startReading.month - 1 + period * rule.interval
            return CivilDay.dayNumber(year: months.floorDivided(by: 12), month: months.floorModulo(12) + 1, day: 1)
        default:
            return CivilDay.dayNumber(year: startReading.year + period * rule.interval, month: 1, day: 1)
        }
    }

    /// The days (day numbers) of calendar period `period` that have slots, in order.
    fileprivate func days(inPeriod period: Int) -> [Int] {
        let startDay = startReading.dayNumber
        switch rule.frequency {
        case .daily:
            let day = startDay + period * rule.interval
            return weekdays.isEmpty || weekdays.contains(CivilDay.weekday(ofDay: day)) ? [day] : []
        case .weekly:
            let monday = monday(of: startDay) + 7 * period * rule.interval
            let days = weekdays.isEmpty ? [CivilDay.weekday(ofDay: startDay)] : weekdays.sorted()
            return days.map { monday + $0 }
        case .monthly:
            let months = startReading.year * 12 + startReading.month - 1 + period * rule.interval
            let (year, month) = (months.floorDivided(by: 12), months.floorModulo(12) + 1)
            let first = CivilDay.dayNumber(year: year, month: month, day: 1)
            let length = CivilDay.daysIn(year: year, month: month)
            guard !rule.byDay.isEmpty else {
                return startReading.day <= length ? [first + startReading.day - 1] : []
            }
            return weekdayDays(from: first, length: length)
        default:
            let year = startReading.year + period * rule.interval
            guard !rule.byDay.isEmpty else {
                let (month, day) = (startReading.month, startReading.day)
                guard day <= CivilDay.daysIn(year: year, month: month) else { return [] }
                return [CivilDay.dayNumber(year: year, month: month, day: day)]
            }
            let first = CivilDay.dayNumber(year: year, month: 1, day: 1)
            return weekdayDays(from: first, length: CivilDay.isLeap(year) ? 366 : 365)
        }
    }

    /// BYDAY expanded over a month or a year of `length` days from day `first`: every such
    /// weekday, or the nth (from the end when negative).
    private func weekdayDays(from first: Int, length: Int) -> [Int] {
        var days = Set<Int>()
        for entry in rule.byDay {
            let firstMatch = first + (entry.weekday.rawValue - CivilDay.weekday(ofDay: first)).floorModulo(7)
            let matches = Array(stride(from: firstMatch, to: first + length, by: 7))
            switch entry.ordinal {
            case nil: days.formUnion(matches)
            case let n? where n > 0 && n <= matches.count: days.insert(matches[n - 1])
            case let n? where n < 0 && -n <= matches.count: days.insert(matches[matches.count + n])
            default: break
            }
        }
        return days.sorted()
    }

    /// The slots of one day, placed on the time line, in order and without repeats (two times in
    /// a DST gap can land on one instant).
    fileprivate func slots(onDay day: Int) -> [Int] {
        let midnight = day * 86_400
        let opening = clock.instant(of: LocalDateTime(secondsSinceEpoch: midnight))
        let closing = clock.instant(of: LocalDateTime(secondsSinceEpoch: midnight + 86_400))
        let offset = clock.offset(at: opening)
        if closing - opening == 86_400 && clock.offset(at: closing - 1) == offset {
            // No change of offset that day: every time is the plain reading minus the offset.
            return times.map { midnight + $0 - offset }
        }
        var slots = times.map { clock.instant(of: LocalDateTime(secondsSinceEpoch: midnight + $0)) }
        slots.sort()
        var unique: [Int] = []
        unique.reserveCapacity(slots.count)
        for slot in slots where slot != unique.last { unique.append(slot) }
        return unique
    }
}

extension RecurrenceExpansion {
    /// The slots of an expansion from a point on, in increasing order.
    ///
    /// With COUNT the slots are counted from the start: arithmetically for sub-daily rules without
    /// limits, one by one otherwise (COUNT is then at most `RecurrenceRule.maxEnumeratedCount`).
    /// Without COUNT the walk begins at the period of the point itself.
    struct Slots: Sequence, IteratorProtocol {
        private let expansion: RecurrenceExpansion
        private let after: Int?
        private var arithmeticIndex: Int?
        private var period: Int
        private var nextPeriod: Int
        private var days: [Int] = []
        private var buffer: [Int] = []
        private var bufferIndex = 0
        private var counted = 0
        private var lastSlot: Int?
        private var emptyPeriods = 0
        private var done = false

        fileprivate init(_ expansion: RecurrenceExpansion, after: Int?) {
            self.expansion = expansion
            self.after = after
            let rule = expansion.rule
            period = 0
            if rule.isArithmetic {
                arithmeticIndex = after.map(expansion.arithmeticIndex(after:)) ?? 0
            } else if rule.count == nil, let after {
                period =
                    expansion.isSubDaily
                    ? expansion.subDailyPeriod(after: after) : expansion.calendarPeriod(after: after)
            }
            nextPeriod = period
        }

        mutating func next() -> Int? {
            while !done {
                guard let slot = nextCandidate() else {
                    done = true
                    return nil
                }
                // Slots before the start are not slots; the start itself is one when the rule
                // yields it. A slot at or before one already given (a DST gap at midnight can
                // place a slot behind the next day's first) is not given twice.
                if slot < expansion.start || slot <= (lastSlot ?? .min) { continue }
                if let limit = expansion.untilLimit, slot > limit { break }
                if let count = expansion.rule.count {
                    guard counted < count else { break }
                    counted += 1
                }
                lastSlot = slot
                if let after, slot <= after { continue }
                return slot
            }
            done = true
            return nil
        }

        private mutating func nextCandidate() -> Int? {
            if let index = arithmeticIndex {
                arithmeticIndex = index + 1
                if let count = expansion.rule.count, index >= count { return nil }
                // Counted here rather than one by one: the index is the slot's place from the start.
                counted = index
                return expansion.arithmeticSlot(index)
            }
            while bufferIndex == buffer.count {
                guard refill() else { return nil }
            }
            defer { bufferIndex += 1 }
            return buffer[bufferIndex]
        }

        /// Loads the next day's or period's slots; false when there are no more.
        private mutating func refill() -> Bool {
            buffer = []
            bufferIndex = 0
            if expansion.isSubDaily {
                guard emptyPeriods < RecurrenceExpansion.maxEmptyPeriods else { return false }
                let origin = expansion.base + nextPeriod * expansion.step
                guard origin < RecurrenceExpansion.horizon else { return false }
                if let limit = expansion.untilLimit, origin > limit { return false }
                period = nextPeriod
                (buffer, nextPeriod) = expansion.subDailySlots(inPeriod: period)
                emptyPeriods = buffer.isEmpty ? emptyPeriods + 1 : 0
                return true
            }
            while days.isEmpty {
                guard emptyPeriods < RecurrenceExpansion.maxEmptyPeriods else { return false }
                period = nextPeriod
                nextPeriod += 1
                // Past UNTIL, or past the horizon (a large INTERVAL over many empty periods).
                let firstDay = expansion.firstDay(ofPeriod: period)
                guard firstDay < RecurrenceExpansion.horizon / 86_400 else { return false }
                if let limit = expansion.untilLimit, (firstDay - 2) * 86_400 > limit { return false }
                days = expansion.days(inPeriod: period)
                emptyPeriods = days.isEmpty ? emptyPeriods + 1 : 0
                // Days wholly before the point asked about need not be placed on the time line
                // (COUNT rules count them, so they keep every day).
                if expansion.rule.count == nil, let after {
                    let firstUseful = after.floorDivided(by: 86_400) - 2
                    days.removeAll { $0 < firstUseful }
                }
            }
            buffer = expansion.slots(onDay: days.removeFirst())
            return true
        }
    }
}

extension Int {
    fileprivate func clamped(to horizon: Int) -> Int { Swift.min(Swift.max(self, -horizon), horizon) }
}

extension Double {
    /// Seconds since the epoch, floored to a whole second and clamped so no arithmetic overflows.
    var wholeSeconds: Int {
        guard isFinite else { return self < 0 ? -RecurrenceExpansion.horizon : RecurrenceExpansion.horizon }
        let bound = Double(RecurrenceExpansion.horizon)
        return Int(Swift.min(Swift.max(rounded(.down), -bound), bound))
    }

    /// Seconds since the epoch, rounded up to a whole second and clamped: where the slot of a
    /// time with a fraction falls, so that it is never spoken before the time asked for.
    var wholeSecondsRoundedUp: Int {
        -(-self).wholeSeconds
    }
}
