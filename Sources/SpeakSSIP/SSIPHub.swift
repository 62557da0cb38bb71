import AnnouncementQueue
import SpeakAPI

/// What every SSIP connection shares: client and message numbers, which announcement is which
/// client's message, and the notifications that speakd's events become.
///
/// Notifications follow speakd's own event stream: BEGIN (701) at the first word, sentence or
/// mark heard (sent when the sink plays its first sample), INDEX MARK (700) as each mark is heard,
/// PAUSED and RESUMED (704, 705), and at `finished` (after the last sample) END (702) when it
/// completed, else CANCELED (703). Every message gets exactly one of 702 and 703, sent only when
/// its client asked for that notification when it sent the message. A message outlives its
/// connection: it is spoken and tracked to its end with nobody to tell.
actor SSIPHub {
    private struct Message {
        let id: Int
        let client: Int
        let notify: Set<SSIPEvent>
        let outbox: SSIPOutbox
        var begun = false
    }

    private let outputs: AnnouncementOutputs
    private var nextClient = 1
    private var nextMessage = 1
    /// Tracked messages by announcement id, until they finish.
    private var messages: [String: Message] = [:]
    /// Submissions under way: the queue sends an announcement's first events before `submit`
    /// returns the id that names it.
    private var submitting = 0
    /// Events of announcements not known yet, held while a submission is under way.
    private var held: [AnnouncementEvent] = []
    private static let maxHeld = 4_096
    /// Events were dropped from a full `held`: settle from the queues' records once no
    /// submission is under way.
    private var droppedHeld = false

    init(outputs: AnnouncementOutputs) {
        self.outputs = outputs
    }

    /// A new connection's client id.
    func newClient() -> Int {
        defer { nextClient += 1 }
        return nextClient
    }

    /// Call before handing an announcement to the intake.
    func beginSubmission() {
        submitting += 1
    }

    /// Ends a submission; for an accepted one, returns its SSIP message id.
    func endSubmission(
        accepted id: String?, client: Int, notify: Set<SSIPEvent>, outbox: SSIPOutbox
    ) async -> Int? {
        submitting -= 1
        var number: Int?
        if let id {
            number = nextMessage
            nextMessage += 1
            messages[id] = Message(id: number!, client: client, notify: notify, outbox: outbox)
            let mine = held.filter { $0.id == id }
            held.removeAll { $0.id == id }
            for event in mine { deliver(event) }
        }
        if submitting == 0 {
            // The rest: other submissions' events held behind them, and speakd's own.
            let rest = held
            held = []
            for event in rest { deliver(event) }
            if droppedHeld {
                droppedHeld = false
                await reconcile()
            }
        }
        return number
    }

    /// The announcement ids of `client`'s messages that have not finished, or of every client's.
    func announcements(of client: Int?) -> [String] {
        messages.filter { client == nil || $0.value.client == client }.map(\.key)
    }

    /// Follows every output's events from `after` until the queues shut down.
    func follow(after start: UInt64) async {
        var last = start
        while !Task.isCancelled {
            for await sequenced in outputs.events(after: last, progress: true) {
                last = sequenced.sequence
                arrived(sequenced.event)
            }
            // The stream ends at shutdown, or when this reader fell too far behind.
            guard await outputs.defaultQueue.isRunning, !Task.isCancelled else { break }
            await reconcile()
        }
        // Every queue has finished its announcements: none should be left; a message that is
        // still tracked gets its one CANCELED all the same.
        for (id, message) in messages {
            send(.cancel, message)
            messages[id] = nil
        }
    }

    private func arrived(_ event: AnnouncementEvent) {
        if submitting > 0, messages[event.id] == nil || held.contains(where: { $0.id == event.id }) {
            if held.count < Self.maxHeld { held.append(event) } else { droppedHeld = true }
            return
        }
        deliver(event)
    }

    private func deliver(_ event: AnnouncementEvent) {
        guard var message = messages[event.id] else { return }
        switch event.type {
        case .word, .sentence, .mark:
            if !message.begun {
                message.begun = true
                send(.begin, message)
            }
            if event.type == .mark { send(.indexMark, message, mark: event.name) }
            messages[event.id] = message
        case .paused:
            send(.pause, message)
        case .resumed:
            send(.resume, message)
        case .finished:
            finish(message, completed: event.reason == .completed)
            messages[event.id] = nil
        case .queued, .started:
            break
        }
    }

    private func finish(_ message: Message, completed: Bool) {
        if completed {
            if !message.begun { send(.begin, message) }
            send(.end, message)
        } else {
            send(.cancel, message)
        }
    }

    /// After falling behind the event stream: closes the messages whose end was missed.
    private func reconcile() async {
        for (id, message) in messages {
            let status = await outputs.status(id: id)
            guard status == nil || status?.state == .finished else { continue }
            guard messages[id] != nil else { continue }
            finish(message, completed: status?.reason == .completed)
            messages[id] = nil
        }
    }

    private func send(_ event: SSIPEvent, _ message: Message, mark: String? = nil) {
        guard message.notify.contains(event) else { return }
        message.outbox.notify(event.reply(message: message.id, client: message.client, mark: mark))
    }
}
