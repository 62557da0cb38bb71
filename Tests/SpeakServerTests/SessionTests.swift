import AnnouncementIntake
import AnnouncementQueue
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IntakeTestSupport
import SpeakAPI
import SpeakServer
import SpeakService
import SpeakTestSupport
import SpeechModel
import Synchronization
import Testing

@Suite("Sessions")
struct SessionTests {
    // MARK: The rules

    private func request(_ json: String) throws -> AnnouncementRequest {
        try AnnouncementRequest.decode(json: Data(json.utf8))
    }

    private func preferences(
        rate: Double = 1, volume: Double = 1, language: String? = nil, voice: String? = nil, moveTo: String? = nil
    ) throws -> SessionPreferences {
        var preferences = SessionPreferences()
        preferences.rate = rate
        preferences.volume = volume
        preferences.language = try language.map { try LanguageTag($0) }
        preferences.voice = voice
        preferences.moveTo = moveTo
        return preferences
    }

    @Test("rate and volume multiply the request's own and each span's, clamped to the attribute's range")
    func multipliersMultiplyAndClamp() throws {
        let original = try request(
            #"{"spans": [{"text": "a "}, {"text": "b", "rate": 1.5, "volume": 0.4}], "rate": 1.2}"#)
        let slower = try preferences(rate: 0.7, volume: 0.5).apply(to: original)
        #expect(slower.utterance.defaults.rate == 1.2 * 0.7)
        #expect(slower.utterance.defaults.volume == 0.5)
        #expect(slower.utterance.spans[0].attributes.rate == nil, "a span without its own inherits the product")
        #expect(slower.utterance.spans[1].attributes.rate == 1.5 * 0.7)
        #expect(slower.utterance.spans[1].attributes.volume == 0.4 * 0.5)
        try slower.utterance.validate()

        let faster = try preferences(rate: 2, volume: 2).apply(to: original)
        #expect(faster.utterance.defaults.rate == 2, "1.2 × 2 clamped to 2.0")
        #expect(faster.utterance.spans[1].attributes.rate == 2)
        #expect(faster.utterance.spans[1].attributes.volume == 0.8)
        #expect(
            try preferences(rate: 0.5).apply(to: try request(#"{"text": "a", "rate": 0.6}"#)).utterance.defaults.rate
                == 0.5)
        #expect(try preferences().apply(to: original) == original, "the defaults change nothing")
    }

    @Test("language and voice fill in only where the request and span have none; moveTo moves the output")
    func fillInAndMove() throws {
        let original = try request(
            #"{"spans": [{"text": "a "}, {"text": "b ", "language": "pt-PT"}, {"text": "c", "voice": "joe"}], "output": "default"}"#
        )
        let applied = try preferences(language: "de", voice: "anna", moveTo: "headset").apply(to: original)
        #expect(applied.utterance.defaults.language?.description == "de")
        #expect(applied.utterance.spans.map(\.attributes.voice) == ["anna", nil, "joe"])
        #expect(applied.utterance.spans[1].attributes.language?.description == "pt-PT")
        #expect(applied.output == "headset")

        let german = try request(#"{"text": "Guten Tag", "language": "de-AT"}"#)
        let kept = try preferences(language: "fr", voice: "anna").apply(to: german)
        #expect(kept.utterance.defaults.language?.description == "de-AT")
        #expect(kept.utterance.spans[0].attributes.voice == nil, "a request's language keeps its own voice")
    }

    // MARK: The book, with a clock the test moves

    /// A book over two outputs whose queues speak at once, and the events of both.
    private struct Book {
        let clock = ManualClock()
        let outputs: AnnouncementOutputs
        let book: SessionBook
        let intake: AnnouncementIntake
        let events: EventLog
        let runners: [Task<Void, Never>]

        init() {
            let shared = SharedQueueState(queues: 2)
            let queues = ["default", "headset"].map {
                AnnouncementQueue(speaker: GatedSpeaker(autoComplete: true), output: $0, shared: shared)
            }
            outputs = AnnouncementOutputs(queues, shared: shared)
            book = SessionBook(outputs: outputs, clock: clock)
            intake = AnnouncementIntake(
                outputs: outputs, renderer: FakeRenderer.tone(), health: SwitchableHealth(), sessions: book)
            events = EventLog(outputs.events(after: 0))
            runners = queues.map { queue in Task { await queue.run() } }
        }

        func accept(_ json: String) async throws -> AnnouncementAccepted {
            let accepted = try await intake.accept(Data(json.utf8)).accepted
            _ = await outputs.finished(id: accepted.id)
            return accepted
        }

        /// The ids `output` remembers, once there are `count` of them (the book hears of a finish
        /// a moment after the queue sends it).
        func remembered(_ count: Int, on output: String) async -> [String] {
            while await book.last(100, heardOn: output).count < count { try? await Task.sleep(for: .milliseconds(2)) }
            return await book.last(100, heardOn: output).map(\.id)
        }

        func shutdown() async {
            await outputs.shutdown()
            for runner in runners { await runner.value }
        }
    }

    @Test("a session ends after its idle timeout; an announcement refreshes it", .timeLimit(.minutes(1)))
    func idleTimeoutWithFakeClock() async throws {
        let book = Book()
        let started = try await book.book.put(SessionRequest(rate: .some(0.8), idleTimeout: .some(10)))
        #expect(started.change == .started)
        await book.clock.waitForSleepers(1)
        book.clock.advance(by: .seconds(8))
        _ = try await book.accept(#"{"text": "still here"}"#)
        await book.clock.waitForSleepers(1)
        book.clock.advance(by: .seconds(8))
        #expect(await book.book.list().count == 1, "16 s after it started, 8 s after the announcement")
        book.clock.advance(by: .seconds(2))
        let ended = await book.events.waitForSession { $0.contains { $0.session?.change == .ended } }
        #expect(ended?.session?.reason == .idle && ended?.id == started.session.id)
        #expect(await book.book.list().isEmpty)
        await book.shutdown()
    }

    @Test("each output has its own session; a replace ends the old one, an end forgets what was heard")
    func twoOutputsReplaceAndForget() async throws {
        let book = Book()
        let hall = try await book.book.put(SessionRequest(rate: .some(0.7)))
        let headset = try await book.book.put(SessionRequest(output: "headset", volume: .some(0.5)))
        #expect(await book.book.list().map(\.output) == ["default", "headset"])
        #expect(hall.session.id != headset.session.id)

        let first = try await book.accept(#"{"text": "one"}"#)
        let onHeadset = try await book.accept(#"{"text": "two", "output": "headset"}"#)
        #expect(await book.remembered(1, on: "default") == [first.id])
        #expect(await book.remembered(1, on: "headset") == [onHeadset.id])
        #expect(
            await book.book.last(1, heardOn: "default").first?.request.utterance.defaults.rate == nil,
            "remembered as asked for, before the session")

        let replaced = try await book.book.put(SessionRequest(replace: true, rate: .some(1.2)))
        #expect(replaced.change == .started && replaced.session.id != hall.session.id)
        _ = await book.events.waitForSession { $0.filter { $0.type == .session }.count >= 4 }
        let changes = book.events.events.compactMap(\.session).map { "\($0.change)\($0.reason.map { ":\($0)" } ?? "")" }
        #expect(changes == ["started", "started", "ended:replaced", "started"])
        #expect(await book.book.last(16, heardOn: "default").isEmpty, "the old session's output forgot")
        #expect(await book.book.last(16, heardOn: "headset").count == 1, "the other output did not")

        await #expect(throws: SpeakError.self) { try await book.book.put(SessionRequest(id: hall.session.id)) }
        try await book.book.end(output: "headset")
        #expect(await book.book.last(16, heardOn: "headset").isEmpty)
        await book.shutdown()
    }

    @Test("a private session needs a private output; its move and privacy wait while the headset is out")
    func privateSessionFollowsTheHeadset() async throws {
        let book = Book()
        var intake = book.intake
        intake.privateOutputs = ["headset"]
        do {
            _ = try await intake.putSession(SessionRequest(isPrivate: .some(true)))
            Issue.record("a private session on the public default output was accepted")
        } catch {
            #expect(error.response.error.field == "private", "\(error)")
        }
        let started = try await intake.putSession(SessionRequest(moveTo: .some("headset"), isPrivate: .some(true)))
        #expect(started.session.isPrivate == true && started.session.headsetOut == nil)

        let moved = try await intake.accept(Data(#"{"text": "Your PIN"}"#.utf8)).request
        #expect(moved.output == "headset" && moved.delivery.isPrivate)

        await book.book.headset(output: "headset", present: false)
        let waiting = await book.events.waitForSession { $0.contains { $0.session?.session.headsetOut == true } }
        #expect(waiting?.session?.change == .changed)
        let stays = try await intake.accept(Data(#"{"text": "Thank you"}"#.utf8)).request
        #expect(
            stays.output == nil && !stays.delivery.isPrivate,
            "the move and the privacy wait while the headset is out")

        await book.book.headset(output: "headset", present: true)
        #expect(await book.book.list().first?.headsetOut == nil)
        let again = try await intake.accept(Data(#"{"text": "Your balance"}"#.utf8)).request
        #expect(again.output == "headset" && again.delivery.isPrivate)
        await book.shutdown()
    }

    @Test("an output remembers its last 16 heard announcements; a repeat is linked and follows the session of now")
    func memoryIsBoundedAndRepeatsFollowTheSession() async throws {
        let book = Book()
        var ids: [String] = []
        for index in 0..<20 { ids.append(try await book.accept(#"{"text": "number \#(index)"}"#).id) }
        _ = await book.events.waitForSession { $0.filter { $0.type == .finished }.count >= 20 }
        let remembered = await book.remembered(16, on: "default")
        #expect(remembered.count == 16)
        // The memory follows the events on a task of its own: wait until it has the last one
        // (not a fixed time, which a loaded machine outlasts), then it holds the newest 16 only.
        let deadline = ContinuousClock.now + .seconds(10)
        while await book.book.last(100, heardOn: "default").last?.id != ids.last, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(await book.book.last(100, heardOn: "default").map(\.id) == Array(ids.suffix(16)))

        try await book.book.put(SessionRequest(rate: .some(0.5), moveTo: .some("headset")))
        let again = try await book.intake.repeatLast(output: "default", count: 2)
        #expect(again.map(\.repeatOf) == Array(ids.suffix(2)))
        for accepted in again { _ = await book.outputs.finished(id: accepted.id) }
        let status = await book.outputs.status(id: again[0].id)
        #expect(status?.output == "headset", "moved by the session of the output it addressed")
        _ = await book.events.waitForSession { $0.filter { $0.type == .repeat }.count >= 2 }
        let repeats = book.events.events.filter { $0.type == .repeat }
        #expect(repeats.map(\.repeatOf) == Array(ids.suffix(2)) && repeats.map(\.output) == ["headset", "headset"])
        #expect(repeats.first?.text == "number 18")

        await #expect(throws: SpeakError.self) { _ = try await book.intake.repeatAnnouncement(id: "nothing") }
        await book.shutdown()
    }

    @Test("a private announcement's repeat answers a key only to the holder of the original's key")
    func privateRepeatKeepsItsText() async throws {
        let book = Book()
        var intake = book.intake
        intake.privateOutputs = ["headset"]
        let original = try await intake.accept(Data(#"{"text": "Your PIN is 4711", "private": true}"#.utf8)).accepted
        _ = await book.outputs.finished(id: original.id)
        let key = try #require(original.key)
        #expect(await book.remembered(1, on: "headset") == [original.id])

        let byID = try await intake.repeatAnnouncement(id: original.id)
        let byOutput = try await intake.repeatLast(output: "headset", count: 1)
        let wrongKey = try await intake.repeatAnnouncement(id: original.id, key: String(repeating: "0", count: 32))
        #expect(byID.key == nil && byOutput.map(\.key) == [nil] && wrongKey.key == nil)
        for id in [byID.id, byOutput[0].id, wrongKey.id] {
            #expect(await book.outputs.status(id: id)?.text == "", "repeat \(id) shows the private text")
        }

        let holder = try await intake.repeatAnnouncement(id: original.id, key: key)
        let shown = try #require(holder.key)
        #expect(shown != key)
        #expect(await intake.status(id: holder.id, key: shown)?.text == "Your PIN is 4711")
        await book.shutdown()
    }
}

/// The events of a stream, kept as they arrive.
final class EventLog: Sendable {
    private let received = Mutex<[AnnouncementEvent]>([])

    init(_ stream: AsyncStream<SequencedAnnouncementEvent>) {
        Task {
            for await event in stream { self.append(event.event) }
        }
    }

    var events: [AnnouncementEvent] { received.withLock { $0 } }

    private func append(_ event: AnnouncementEvent) { received.withLock { $0.append(event) } }

    /// Waits until the events so far `match`; returns the last `session` event.
    func waitForSession(until matches: @escaping ([AnnouncementEvent]) -> Bool) async -> AnnouncementEvent? {
        while !matches(events) { try? await Task.sleep(for: .milliseconds(2)) }
        return events.last { $0.type == .session }
    }
}
