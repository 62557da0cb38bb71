import FoundationEssentials
import SpeakAPI
import SpeakService
import SpeechModel

/// What every SSIP connection shares: client and message numbers, which announcement is which
/// client's message, and the notifications that speakd's events become.
///
/// Notifications follow speakd's own event stream: BEGIN (701) at the first word, sentence or
/// mark heard (sent when the sink plays its first sample), INDEX MARK (700) as each mark is heard,
/// PAUSED and RESUMED (704, 705), and at `finished` (after the last sample) END (702) when it
/// completed, else CANCELED (703). Every message gets exactly one of 702 and 703, sent only when
/// its client asked for that notification when it sent the message. A message outlives its
/// connection: it is spoken and tracked to its end with nobody to tell.
///
/// A message that one of speakd's own announcements interrupts (a `high` one, or a `default` one
/// with `queue: false`) is not cancelled: its rest, from the word it was cut off in, is queued
/// again behind the announcement, and its client hears no 703 it did not ask for (Chromium, which waits for each
/// message's 702 or 703, would otherwise stay silent until the page calls `cancel()`). It keeps
/// its message id; BEGIN is not sent again. After `maxRequeues` interruptions it ends with 703.
actor SSIPHub {
    private struct Message {
        let id: Int
        let client: Int
        let notify: Set<SSIPEvent>
        let outbox: SSIPOutbox
        /// The request, to queue it again after an interruption; its text becomes what was
        /// not heard yet.
        var body: SSIPRequest
        /// Where the word heard last starts in the text of its current announcement (UTF-16).
        var heardFrom = 0
        /// Its SSIP priority.
        let priority: String
        var begun = false
        var requeues = 0
    }

    /// How often one message is queued again after an interruption before it ends with 703.
    static let maxRequeues = 3

    private let service: any SpeakService
    private var nextClient = 1
    private var nextMessage = 1
    /// Tracked messages by announcement id, until they finish.
    private var messages: [String: Message] = [:]
    /// Messages handed to the intake whose announcement id is not known yet, by message number.
    /// The queue sends an announcement's first events before the intake returns its id; each
    /// event carries the message number in its origin (`requestId` `ssip:N`), so the first one
    /// binds the message to its id and no event is held back.
    private var pending: [Int: Message] = [:]

    init(service: any SpeakService) {
        self.service = service
    }

    /// A new connection's client id.
    func newClient() -> Int {
        defer { nextClient += 1 }
        return nextClient
    }

    /// Numbers a message about to be handed to the intake and tracks it; returns its number and
    /// its request with the origin that names it, to submit. Call `accepted` or `refused` after.
    func register(
        client: Int, notify: Set<SSIPEvent>, outbox: SSIPOutbox, body: SSIPRequest, priority: String
    ) -> (number: Int, body: SSIPRequest) {
        let number = nextMessage
        nextMessage += 1
        var body = body
        body.origin.requestId = Self.requestId(number)
        pending[number] = Message(
            id: number, client: client, notify: notify, outbox: outbox, body: body, priority: priority)
        return (number, body)
    }

    /// The intake accepted message `number` as announcement `id`.
    func accepted(_ number: Int, id: String) async {
        guard let message = pending.removeValue(forKey: number) else {
            // Its first event bound it already.
            if let message = messages[id] { await stopSpeaking(below: id, priority: message.priority) }
            return
        }
        messages[id] = message
        await stopSpeaking(below: id, priority: message.priority)
    }

    /// The intake refused message `number`.
    func refused(_ number: Int) {
        pending[number] = nil
    }

    /// The origin's request id of message `number`.
    private static func requestId(_ number: Int) -> String { "ssip:\(number)" }

    /// The message number an event's origin names, for an SSIP announcement.
    private static func messageNumber(of event: AnnouncementEvent) -> Int? {
        guard event.origin?.front == "ssip", let requestId = event.origin?.requestId, requestId.hasPrefix("ssip:")
        else { return nil }
        return Int(requestId.dropFirst(5))
    }

    /// speech-dispatcher's `important` stops a speaking message of another priority (which
    /// ends with 703), while waiting ones wait behind it.
    private func stopSpeaking(below id: String, priority: String) async {
        for (other, message) in messages
        where other != id && SSIPMapping.stops(priority, speaking: message.priority) {
            let state = await service.status(id: other, key: nil)?.state
            if state == .speaking || state == .paused { _ = try? await service.cancel(id: other) }
        }
    }

    /// The announcement ids of `client`'s messages that have not finished, or of every client's.
    func announcements(of client: Int?) -> [String] {
        messages.filter { client == nil || $0.value.client == client }.map(\.key)
    }

    /// Follows every output's events from `after` until the queues shut down.
    func follow(after start: UInt64) async {
        for await item in service.followEvents(after: start, progress: true) {
            switch item {
            case .event(let event): await arrived(event)
            case .fellBehind: await reconcile()
            }
        }
        // Every queue has finished its announcements: none should be left; a message that is
        // still tracked gets its one CANCELED all the same.
        for (id, message) in messages {
            send(.cancel, message)
            messages[id] = nil
        }
    }

    private func arrived(_ event: AnnouncementEvent) async {
        if messages[event.id] == nil, let number = Self.messageNumber(of: event),
            let message = pending.removeValue(forKey: number)
        {
            messages[event.id] = message
        }
        await deliver(event)
    }

    private func deliver(_ event: AnnouncementEvent) async {
        guard var message = messages[event.id] else { return }
        switch event.type {
        case .word, .sentence, .mark, .clip:
            if !message.begun {
                message.begun = true
                send(.begin, message)
            }
            if event.type == .mark { send(.indexMark, message, mark: event.name) }
            if event.type == .word, let range = event.range { message.heardFrom = range.location }
            messages[event.id] = message
        case .paused:
            send(.pause, message)
        case .resumed:
            send(.resume, message)
        case .finished:
            messages[event.id] = nil
            if event.reason == .interrupted, message.requeues < Self.maxRequeues {
                await requeue(message)
            } else {
                finish(message, completed: event.reason == .completed)
            }
        case .queued, .started, .headset, .session, .repeat, .schedule:
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

    /// Queues an interrupted message again, from the word it was cut off in (from its start
    /// when it has no plain text: SSML, spelt out, a sound icon); 703 when that is refused.
    private func requeue(_ message: Message) async {
        var message = message
        message.requeues += 1
        if let rest = Self.rest(of: message.body, from: message.heardFrom) {
            message.body.request.utterance = Utterance(rest, defaults: message.body.request.utterance.defaults)
        }
        message.heardFrom = 0
        pending[message.id] = message
        do {
            let accepted = try await service.accept(message.body.request, origin: message.body.origin)
            await self.accepted(message.id, id: accepted.id)
        } catch {
            refused(message.id)
            finish(message, completed: false)
        }
    }

    /// The text of `body` from UTF-16 offset `offset` (where the word heard last starts), or nil
    /// to speak it all again: nothing heard yet, no plain text, or nothing but spaces and
    /// punctuation left.
    static func rest(of body: SSIPRequest, from offset: Int) -> String? {
        guard offset > 0, body.isPlainText else { return nil }
        let text = body.request.utterance.text
        let utf16 = text.utf16
        guard offset < utf16.count,
            let start = utf16.index(utf16.startIndex, offsetBy: offset, limitedBy: utf16.endIndex)?
                .samePosition(in: text.unicodeScalars)
        else { return nil }
        let rest = String(text.unicodeScalars[start...])
        return rest.contains(where: { $0.isLetter || $0.isNumber }) ? rest : nil
    }

    /// After falling behind the event stream: closes the messages whose end was missed.
    private func reconcile() async {
        for (id, message) in messages {
            let status = await service.status(id: id, key: nil)
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
