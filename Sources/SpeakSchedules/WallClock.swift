import Foundation

/// Places wall-clock readings of one time zone on the time line, and reads instants back.
///
/// RFC 5545 §3.3.5 decides the two readings a DST change makes awkward: a reading in the
/// spring-forward gap does not exist and is taken with the UTC offset from before the gap (02:30
/// in a 02:00→03:00 gap is 03:30), and a reading that the fall-back repeats is its first
/// occurrence.
struct WallClock: Sendable {
    let zone: TimeZone

    func offset(at seconds: Int) -> Int {
        zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))
    }

    /// The wall-clock reading at an instant (seconds since the epoch).
    func reading(at seconds: Int) -> LocalDateTime {
        LocalDateTime(secondsSinceEpoch: seconds + offset(at: seconds))
    }

    /// The instant (seconds since the epoch) of a wall-clock reading.
    func instant(of reading: LocalDateTime) -> Int {
        let naive = reading.secondsSinceEpoch
        // Offsets in force a day either side cover both sides of any transition near the reading
        // (zones change offset at most a few times a year).
        let before = offset(at: naive - 86_400)
        let after = offset(at: naive + 86_400)
        var earliest: Int?
        for candidate in [before, offset(at: naive), after] {
            let instant = naive - candidate
            if offset(at: instant) == candidate { earliest = Swift.min(earliest ?? instant, instant) }
        }
        // No offset reads back to this reading: it is in a gap, taken with the offset before it.
        return earliest ?? naive - before
    }
}
