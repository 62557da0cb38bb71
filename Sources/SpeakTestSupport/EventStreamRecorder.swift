import Foundation
import SpeakAPI
import SpeakClient
import SpeechModel
import Synchronization

/// Follows a speakd event stream and keeps every announcement event with the moment it arrived.
///
/// When the daemon ends the stream early (a subscriber that fell behind is dropped by design), the
/// recorder reconnects with the last event id it saw, so the record has no gap and no repeat as long
/// as the daemon's history still holds the missed events. It stops when the daemon closes the
/// stream at shutdown, when it cannot reconnect, or on `stop()`.
public final class EventStreamRecorder: Sendable {
    /// One event as it arrived.
    public struct Received: Sendable {
        /// The sequence number of the SSE `id:` (`<epoch>-<sequence>`).
        public var sequence: UInt64?
        public var event: AnnouncementEvent
        /// When this process read it.
        public var receivedAt: ContinuousClock.Instant
    }

    private struct State {
        var received: [Received] = []
        var reconnects = 0
        var ended = false
        var failure: String?
    }

    /// Shared with the following task, which must not keep the recorder itself alive.
    private final class Storage: Sendable {
        let state = Mutex(State())
    }

    private let storage = Storage()
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts following `client`'s `/v1/events`.
    /// - Parameter lastEventID: where to start; "0" replays the daemon's whole history first
    ///   (a fresh daemon's every event), nil takes live events only.
    /// - Parameter path: the stream's path and query (`/v1/events?progress=false`).
    public init(client: SpeakHTTPClient, path: String = "/v1/events", lastEventID: String? = "0") {
        let work = Task { [storage] in
            var resumeAfter = lastEventID
            while !Task.isCancelled {
                do {
                    for try await message in client.events(path, lastEventID: resumeAfter) {
                        let now = ContinuousClock.now
                        if let id = message.id { resumeAfter = id }
                        guard let event = try? message.announcementEvent() else { continue }
                        storage.state.withLock {
                            $0.received.append(
                                Received(sequence: message.eventID?.sequence, event: event, receivedAt: now))
                        }
                    }
                } catch {
                    if !Task.isCancelled { storage.state.withLock { $0.failure = "\(error)" } }
                    break
                }
                // A clean end: either shutdown (reconnecting fails) or this subscriber was dropped.
                guard !Task.isCancelled else { break }
                storage.state.withLock { $0.reconnects += 1 }
            }
            storage.state.withLock { $0.ended = true }
        }
        task.withLock { $0 = work }
    }

    deinit {
        task.withLock { $0?.cancel() }
    }

    /// Stops following the stream.
    public func stop() {
        task.withLock { $0?.cancel() }
    }

    /// Every event so far, in arrival order.
    public var received: [Received] { storage.state.withLock { $0.received } }

    /// Every announcement event so far, in arrival order.
    public var events: [AnnouncementEvent] { received.map(\.event) }

    /// How often the stream ended and was reopened.
    public var reconnects: Int { storage.state.withLock { $0.reconnects } }

    /// The error that ended the recording, if one did (cannot connect once the daemon is gone, …).
    public var failure: String? { storage.state.withLock { $0.failure } }

    /// True once the recorder has stopped following.
    public var hasEnded: Bool { storage.state.withLock { $0.ended } }

    /// The events of announcement `id`, in arrival order.
    public func events(for id: String) -> [AnnouncementEvent] {
        events.filter { $0.id == id }
    }

    /// The `finished` events of `id`.
    public func finished(_ id: String) -> [AnnouncementEvent] {
        events.filter { $0.id == id && $0.type == .finished }
    }

    /// The first event of `type` for `id`, with its arrival time.
    public func first(_ type: AnnouncementEvent.Kind, of id: String) -> Received? {
        received.first { $0.event.id == id && $0.event.type == type }
    }

    /// Waits until `condition` holds for the events received so far.
    /// - Returns: true when it held within `timeout`.
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(30), until condition: ([AnnouncementEvent]) -> Bool
    ) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if condition(events) { return true }
            if ContinuousClock.now > deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until every id in `ids` has a `finished` event.
    @discardableResult
    public func waitForFinished(_ ids: some Collection<String>, timeout: Duration = .seconds(30)) async -> Bool {
        let wanted = Set(ids)
        return await wait(timeout: timeout) { events in
            wanted.isSubset(of: Set(events.lazy.filter { $0.type == .finished }.map(\.id)))
        }
    }

    /// Waits until `id` has an event of `type`; returns it with its arrival time.
    public func waitFor(_ type: AnnouncementEvent.Kind, of id: String, timeout: Duration = .seconds(30)) async
        -> Received?
    {
        _ = await wait(timeout: timeout) { events in events.contains { $0.id == id && $0.type == type } }
        return first(type, of: id)
    }
}
