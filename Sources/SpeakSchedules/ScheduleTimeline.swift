import Foundation

/// The slots of a schedule on the time line: its one `at`, or its rule's instances.
///
/// Finding a slot far from the start does not walk every instance: without COUNT the walk begins
/// at the period of the time asked about, and a sub-daily rule without limiting BY parts is
/// computed arithmetically even with COUNT. Other COUNT rules are enumerated from the start,
/// which `RecurrenceRule.maxEnumeratedCount` bounds.
public struct ScheduleTimeline: Sendable {
    private enum Kind: Sendable {
        case once(Int)
        case recurring(RecurrenceExpansion)
    }

    /// Slots fall on whole seconds (RFC 5545 times have no fractions): a fraction in `at` or
    /// `start` is rounded up to the next second, so a slot is never before the time asked for.
    private let kind: Kind

    /// The slots of `definition`.
    public init(_ definition: ScheduleDefinition) {
        self.init(definition.timing)
    }

    /// The slots of `timing`.
    public init(_ timing: ScheduleDefinition.Timing) {
        switch timing {
        case .once(let at):
            kind = .once(at.timeIntervalSince1970.wholeSecondsRoundedUp)
        case .recurring(let rule, let start, let zone):
            kind = .recurring(RecurrenceExpansion(rule: rule, start: start, zone: zone))
        }
    }

    /// The first slot of all, or nil when there is none.
    public var firstSlot: Date? { next(after: nil).map(date) }

    /// The first slot strictly after `date`.
    public func nextSlot(after date: Date) -> Date? {
        next(after: Self.secondsBefore(date, inclusive: false)).map(self.date)
    }

    /// The first slot at or after `date`.
    public func firstSlot(atOrAfter date: Date) -> Date? {
        next(after: Self.secondsBefore(date, inclusive: true)).map(self.date)
    }

    /// The last slot at or before `date`.
    public func lastSlot(atOrBefore date: Date) -> Date? {
        latest(atOrBefore: date.timeIntervalSince1970.wholeSeconds, after: nil).map(self.date)
    }

    /// The slots in `(after, through]`, at most `limit` of them.
    public func slots(after: Date, through: Date, limit: Int = 10_000) -> [Date] {
        let end = through.timeIntervalSince1970.wholeSeconds
        var result: [Date] = []
        for slot in sequence(after: Self.secondsBefore(after, inclusive: false)) {
            guard slot <= end, result.count < limit else { break }
            result.append(date(slot))
        }
        return result
    }

    // MARK: Whole seconds

    /// The whole second after which the slots asked for begin: a whole-second slot is after
    /// `date` when it is after `date`'s second, and at or after it when it is after the second
    /// before `date` rounded up.
    private static func secondsBefore(_ date: Date, inclusive: Bool) -> Int {
        inclusive ? -(-date.timeIntervalSince1970).wholeSeconds - 1 : date.timeIntervalSince1970.wholeSeconds
    }

    private func date(_ seconds: Int) -> Date { Date(timeIntervalSince1970: Double(seconds)) }

    func sequence(after seconds: Int?) -> AnyIterator<Int> {
        switch kind {
        case .once(let at):
            var pending = seconds.map { at > $0 } ?? true
            return AnyIterator {
                defer { pending = false }
                return pending ? at : nil
            }
        case .recurring(let expansion):
            var slots = expansion.slots(after: seconds)
            return AnyIterator { slots.next() }
        }
    }

    /// The first slot after `seconds` (the first of all when nil).
    func next(after seconds: Int?) -> Int? {
        sequence(after: seconds).next()
    }

    /// The last slot at or before `time` and after `floor`.
    ///
    /// A rule counted one by one is walked once from the start. Any other finds a window with a
    /// slot by looking ever further back (1 s, 2 s, 4 s…) and then bisects it, so it needs a
    /// few dozen forward searches, each of which jumps to its period, however dense the slots.
    func latest(atOrBefore time: Int, after floor: Int?) -> Int? {
        let lowest: Int
        switch kind {
        case .once(let at):
            return at <= time && at > (floor ?? .min) ? at : nil
        case .recurring(let expansion):
            if expansion.rule.count != nil && !expansion.rule.isArithmetic {
                var found: Int?
                for slot in sequence(after: floor) {
                    guard slot <= time else { break }
                    found = slot
                }
                return found
            }
            lowest = Swift.max(floor ?? .min, expansion.start - 1)
        }
        guard time > lowest else { return nil }
        func hasSlot(after point: Int) -> Bool { next(after: point).map { $0 <= time } ?? false }
        var window = 1
        var from = Swift.max(time - window, lowest)
        while !hasSlot(after: from) {
            guard from > lowest else { return nil }
            window = Swift.min(window * 2, RecurrenceExpansion.horizon * 2)
            from = Swift.max(time - window, lowest)
        }
        // A slot follows `low` by `time`, none follows `high`: close in on the last one.
        var (low, high) = (from, time)
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if hasSlot(after: middle) { low = middle } else { high = middle }
        }
        return next(after: low)
    }
}
