import AnnouncementQueue
import SpeakAPI
import Synchronization

/// The texts of private announcements, each shown only to the holder of the key its poster was
/// answered with (docs/privacy.md). Access control lives here, beside the sessions, not in the
/// queue, which schedules and keeps no key.
///
/// Bounded: the newest `capacity` are kept, about what the queues remember (a waiting list and
/// 1,024 finished announcements an output); a key older than that finds an announcement the
/// queue has forgotten anyway.
final class PrivateTexts: Sendable {
    private struct State {
        var byID: [String: (key: String, text: String)] = [:]
        var order: [String] = []
    }
    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Makes the key of private announcement `id` (128 random bits in hex) and keeps `text` for it.
    func key(for id: String, text: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let key = (0..<2).map { _ in
            let part = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - part.count) + part
        }.joined()
        state.withLock { state in
            state.byID[id] = (key, text)
            state.order.append(id)
            if state.order.count > capacity { state.byID[state.order.removeFirst()] = nil }
        }
        return key
    }

    /// The text of `id` when `key` is its key; nil otherwise (the key is compared in time that
    /// does not depend on where it differs).
    func text(of id: String, key: String) -> String? {
        guard let held = state.withLock({ $0.byID[id] }) else { return nil }
        let (x, y) = (Array(held.key.utf8), Array(key.utf8))
        guard x.count == y.count, zip(x, y).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else { return nil }
        return held.text
    }
}

extension AnnouncementIntake {
    /// One announcement in whichever queue holds it (`AnnouncementOutputs.status(id:)`); a
    /// private one's text only with its `key` (`GET /v1/announcements/{id}` with
    /// `Speak-Announcement-Key`).
    public func status(id: String, key: String? = nil) async -> AnnouncementStatus? {
        guard var status = await outputs.status(id: id) else { return nil }
        if status.private == true, let key, let text = privateTexts.text(of: id, key: key) { status.text = text }
        return status
    }

    /// Whether `key` is the key of the private announcement `id`.
    func isKey(_ key: String, of id: String) -> Bool {
        privateTexts.text(of: id, key: key) != nil
    }
}
