import Logging
import SpeakAPI
import Synchronization
import Testing

@testable import SpeakWyoming

/// The session against the fake backend: what each event is answered with.
@Suite struct WyomingSessionTests {
    final class Sent: Sendable {
        private let events = Mutex<[WyomingEvent]>([])
        var all: [WyomingEvent] { events.withLock { $0 } }
        var types: [String] { all.map(\.type) }
        func append(_ event: WyomingEvent) { events.withLock { $0.append(event) } }
    }

    private func session(
        _ backend: FakeBackend, satellite: WyomingSettings.Satellite? = nil
    ) -> (WyomingSession, Sent) {
        let sent = Sent()
        var settings = WyomingSettings(version: "1.0", satellite: satellite)
        settings.samplesPerChunk = 100
        let session = WyomingSession(
            backend: backend, settings: settings, peer: "test", send: { sent.append($0) },
            logger: Logger(label: "test"))
        return (session, sent)
    }

    @Test func describeListsOneTTSProgramWithEveryVoice() async throws {
        let (session, sent) = session(FakeBackend())
        try await session.handle(WyomingEvent("describe"))
        let info = try #require(sent.all.first)
        #expect(info.type == "info")
        guard case .array(let programs) = info.data["tts"], let program = programs.first?.object else {
            Issue.record("no tts program")
            return
        }
        #expect(programs.count == 1)
        #expect(program["supports_synthesize_streaming"] == true)
        guard case .array(let voices) = program["voices"] else {
            Issue.record("no voices")
            return
        }
        #expect(voices.compactMap { $0.object?["name"]?.string } == ["gmw/en", "en_US-lessac-medium"])
        #expect(voices.allSatisfy { $0.object?["installed"] == true })
        #expect(voices.first?.object?["languages"] == ["en", "en-GB"])
        #expect(info.data["satellite"] == nil)
    }

    @Test func synthesizeIsOneStartItsChunksAndOneStop() async throws {
        let backend = FakeBackend()
        let (session, sent) = session(backend)
        try await session.handle(
            WyomingEvent("synthesize", data: ["text": "Hello there.", "voice": ["name": "gmw/en", "language": "en"]]))
        #expect(backend.rendered == [WyomingSpeech(text: "Hello there.", voice: "gmw/en", language: "en")])
        #expect(sent.types == ["audio-start", "audio-chunk", "audio-chunk", "audio-stop"])
        #expect(sent.all[0].data == ["rate": 22_050, "width": 2, "channels": 1])
        let payload = sent.all.filter { $0.type == "audio-chunk" }.flatMap(\.payload)
        #expect(payload == WyomingSession.bytes(FakeBackend.samples(for: "Hello there.")[...]))
    }

    @Test(arguments: [
        (WyomingEvent("synthesize", data: ["text": "Hi", "voice": ["name": "nobody"]]), "notFound"),
        (WyomingEvent("synthesize", data: ["text": "  "]), "outOfRange"),
        (WyomingEvent("synthesize", data: ["text": 3]), "malformedRequest"),
        (WyomingEvent("transcribe"), "malformedRequest"),
        (WyomingEvent("synthesize-chunk", data: ["text": "x"]), "malformedRequest"),
        (WyomingEvent("synthesize-stop"), "malformedRequest"),
        (WyomingEvent("audio-chunk", payload: [0, 0]), "unsupported"),
        (WyomingEvent("run-satellite"), "unsupported"),
    ])
    func aRefusalIsAnErrorWithTheHTTPCode(event: WyomingEvent, code: String) async throws {
        let (session, sent) = session(FakeBackend())
        try await session.handle(event)
        #expect(sent.types == ["error"])
        #expect(sent.all.first?.data["code"] == .string(code))
        #expect(sent.all.first?.data["text"]?.string?.isEmpty == false)
    }

    @Test func aStreamIsSpokenSentenceBySentenceOnceAndEndsWithStopped() async throws {
        let backend = FakeBackend()
        let (session, sent) = session(backend)
        try await session.handle(WyomingEvent("synthesize-start", data: ["voice": ["name": "gmw/en"]]))
        try await session.handle(WyomingEvent("synthesize-chunk", data: ["text": "Hello wor"]))
        #expect(sent.all.isEmpty)
        try await session.handle(WyomingEvent("synthesize-chunk", data: ["text": "ld. How are"]))
        // The first sentence is spoken before the stream ends.
        #expect(sent.types.first == "audio-start")
        #expect(sent.types.last == "audio-stop")
        try await session.handle(WyomingEvent("synthesize-chunk", data: ["text": " you?"]))
        // The compatibility `synthesize` is not spoken a second time.
        try await session.handle(WyomingEvent("synthesize", data: ["text": "Hello world. How are you?"]))
        try await session.handle(WyomingEvent("synthesize-stop"))
        #expect(backend.rendered.map(\.text) == ["Hello world.", "How are you?"])
        #expect(backend.rendered.allSatisfy { $0.voice == "gmw/en" })
        #expect(sent.types.filter { $0 == "audio-start" }.count == 2)
        #expect(sent.types.filter { $0 == "audio-stop" }.count == 2)
        #expect(sent.types.last == "synthesize-stopped")
        #expect(Set(sent.all.filter { $0.type == "audio-start" }.map(\.data)).count == 1)
    }

    @Test func pingIsAnsweredWithPong() async throws {
        let (session, sent) = session(FakeBackend())
        try await session.handle(WyomingEvent("ping", data: ["text": "t"]))
        #expect(sent.all == [WyomingEvent("pong", data: ["text": "t"])])
    }

    @Test func aSatelliteDescribesItselfAndAnnouncesWhatItIsSentThenSaysPlayed() async throws {
        let backend = FakeBackend()
        let (session, sent) = session(backend, satellite: .init(output: "hall"))
        try await session.handle(WyomingEvent("describe"))
        #expect(sent.all.first?.data["satellite"]?.object?["name"] == "speakd hall")
        #expect(sent.all.first?.data["snd"] != [])
        try await session.handle(WyomingEvent("run-satellite"))
        // A satellite hears the pipeline's other events and does not answer them.
        try await session.handle(WyomingEvent("synthesize", data: ["text": "announced by HA"]))
        try await session.handle(WyomingEvent("transcript", data: ["text": "x"]))
        let format: [String: JSONValue] = ["rate": 22_050, "width": 2, "channels": 1]
        try await session.handle(WyomingEvent("audio-start", data: format))
        try await session.handle(WyomingEvent("audio-chunk", data: format, payload: [1, 0, 2, 0]))
        try await session.handle(WyomingEvent("audio-chunk", data: format, payload: [0xFF, 0xFF]))
        try await session.handle(WyomingEvent("audio-stop"))
        await session.finish()
        #expect(backend.rendered.isEmpty)
        #expect(sent.types == ["info", "played"])
        let announced = try #require(backend.announced.first)
        #expect(announced.recording.samples == [1, 2, -1])
        #expect(announced.output == "hall")
        #expect(announced.origin.front == "wyoming")
    }

    @Test func aSatelliteRefusesAChunkWithoutAStartAndAnOddPayload() async throws {
        let (session, sent) = session(FakeBackend(), satellite: .init(output: "hall"))
        try await session.handle(WyomingEvent("audio-chunk", payload: [0, 0]))
        try await session.handle(WyomingEvent("audio-start", data: ["rate": 22_050, "width": 2, "channels": 1]))
        try await session.handle(WyomingEvent("audio-chunk", payload: [0, 0, 0]))
        try await session.handle(WyomingEvent("audio-start", data: ["rate": 22_050, "width": 4, "channels": 1]))
        #expect(sent.types == ["error", "error", "error"])
        #expect(sent.all.map { $0.data["code"]?.string } == ["malformedRequest", "malformedRequest", "unsupported"])
    }

    @Test func aRefusedAnnouncementIsAnErrorThenPlayed() async throws {
        let (session, sent) = session(FakeBackend(), satellite: .init(output: "nowhere"))
        try await session.handle(WyomingEvent("audio-start", data: ["rate": 22_050, "width": 2, "channels": 1]))
        try await session.handle(WyomingEvent("audio-stop"))
        await session.finish()
        #expect(sent.types == ["error", "played"])
    }
}
