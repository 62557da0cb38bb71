import Logging
import SpeakAPI
import SpeakService
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Testing

@testable import SpeakWyoming

/// The Wyoming front over a fake service: it goes through the door's calls, and a refusal keeps
/// the service's error body, so a Wyoming `error` has the code the HTTP API would answer.
@Suite struct ServiceWyomingBackendTests {
    @Test func anAnnounceIsOneRecordingThroughTheDoor() async throws {
        let service = FakeSpeakService()
        let backend = ServiceWyomingBackend(service: service)
        // 0.5 s of stereo at 44.1 kHz: mixed to mono and brought to the engine's 22,050 Hz.
        let recording = WyomingRecording(
            format: AudioFormat(sampleRate: 44_100, channels: 2), samples: Array(repeating: 1_000, count: 44_100))
        let finished = try await backend.announce(
            recording, output: "hall", origin: AnnouncementOrigin(front: "wyoming", detail: "test"))
        #expect(finished.type == .finished && finished.success == true)
        #expect(
            service.calls.map(\.description) == [
                "acceptRecording 11025 samples to hall from wyoming", "finished fake-1",
            ])
    }

    @Test func aRefusedRenderKeepsTheServiceCode() async throws {
        let service = FakeSpeakService()
        let refusal = SpeakError(.notFound, name: "notFound", "no voice 'xx'", field: "voice")
        service.refuse("render", with: refusal)
        let backend = ServiceWyomingBackend(service: service)
        await #expect(throws: refusal.response) {
            _ = try await backend.render(WyomingSpeech(text: "Hello", voice: "xx"))
        }
    }
}

/// The Wyoming front as Home Assistant meets it, a session over the service's backend, against
/// the fake service: which door calls each event makes, and each refusal code as the `error`
/// event's code (the service's error body's, as HTTP answers it).
@Suite struct WyomingDoorTests {
    private func session(
        _ service: FakeSpeakService, satellite: WyomingSettings.Satellite? = nil
    ) -> (WyomingSession, WyomingSessionTests.Sent) {
        let sent = WyomingSessionTests.Sent()
        let session = WyomingSession(
            backend: ServiceWyomingBackend(service: service),
            settings: WyomingSettings(version: "1.0", satellite: satellite), peer: "test",
            send: { sent.append($0) }, logger: Logger(label: "test"))
        return (session, sent)
    }

    @Test func describeListsTheServicesVoices() async throws {
        let service = FakeSpeakService(voices: [
            VoiceInfo(identifier: "gmw/en", name: "gmw/en", languages: ["en"], engine: "espeak-ng")
        ])
        let (session, sent) = session(service)
        try await session.handle(WyomingEvent("describe"))
        #expect(sent.types == ["info"])
        guard case .array(let programs) = sent.all.first?.data["tts"],
            case .array(let voices)? = programs.first?.object?["voices"]
        else {
            Issue.record("no tts program with voices")
            return
        }
        #expect(voices.compactMap { $0.object?["name"]?.string } == ["gmw/en"])
        #expect(service.calls.map(\.description) == ["voices"])
    }

    @Test func synthesizeIsOneRenderThroughTheDoor() async throws {
        let service = FakeSpeakService()
        let (session, sent) = session(service)
        try await session.handle(WyomingEvent("synthesize", data: ["text": "Hello there."]))
        #expect(sent.types.first == "audio-start" && sent.types.last == "audio-stop")
        // The fake's render: 2,205 samples of silence.
        #expect(sent.all.filter { $0.type == "audio-chunk" }.flatMap(\.payload).count == 2 * 2_205)
        #expect(service.calls.map(\.description) == ["render Hello there."])
    }

    @Test(arguments: SpeakError.Code.everyCode)
    func aRefusedRenderIsAnErrorWithTheServicesCode(_ code: SpeakError.Code) async throws {
        let service = FakeSpeakService()
        service.refuse("render", with: SpeakError(code, name: "\(code)Code", "refused by the test", field: "text"))
        let (session, sent) = session(service)
        try await session.handle(WyomingEvent("synthesize", data: ["text": "Hello"]))
        #expect(sent.types == ["error"])
        #expect(sent.all.first?.data["code"] == .string("\(code)Code"))
        #expect(service.calls.map(\.name) == ["render"])
    }

    /// A satellite's announcement is one recording accepted through the door and its `finished`;
    /// a refusal is an `error` with the service's code, and `played` follows either way.
    @Test(arguments: [nil, SpeakError.Code.queueFull, .audioUnavailable, .invalid])
    func anAnnouncementGoesThroughTheDoor(_ refused: SpeakError.Code?) async throws {
        let service = FakeSpeakService()
        if let refused {
            service.refuse("acceptRecording", with: SpeakError(refused, name: "\(refused)Code", "refused by the test"))
        }
        let (session, sent) = session(service, satellite: .init(output: "hall"))
        let format: [String: JSONValue] = ["rate": 22_050, "width": 2, "channels": 1]
        try await session.handle(WyomingEvent("audio-start", data: format))
        try await session.handle(WyomingEvent("audio-chunk", data: format, payload: [1, 0, 2, 0]))
        try await session.handle(WyomingEvent("audio-stop"))
        await session.finish()
        if let refused {
            #expect(sent.types == ["error", "played"])
            #expect(sent.all.first?.data["code"] == .string("\(refused)Code"))
            #expect(service.calls.map(\.description) == ["acceptRecording 2 samples to hall from wyoming"])
        } else {
            #expect(sent.types == ["played"])
            #expect(
                service.calls.map(\.description) == [
                    "acceptRecording 2 samples to hall from wyoming", "finished fake-1",
                ])
        }
    }
}
