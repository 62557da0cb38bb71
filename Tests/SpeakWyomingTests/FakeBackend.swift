import FoundationEssentials
import SpeakAPI
import SpeakService
import SpeechRendering
import Synchronization

@testable import SpeakWyoming

/// A backend that renders each text as ten samples per character, refuses the voice `nobody`
/// and blank texts as the intake would, and records what it was asked.
final class FakeBackend: WyomingBackend {
    let format = AudioFormat(sampleRate: 22_050)
    private let state = Mutex<(rendered: [WyomingSpeech], announced: [(WyomingRecording, String, AnnouncementOrigin)])>(
        ([], []))

    var rendered: [WyomingSpeech] { state.withLock { $0.rendered } }
    var announced: [(recording: WyomingRecording, output: String, origin: AnnouncementOrigin)] {
        state.withLock { $0.announced.map { ($0.0, $0.1, $0.2) } }
    }

    func voices() async throws(ErrorResponse) -> [WyomingVoice] {
        [
            WyomingVoice(
                name: "gmw/en", languages: ["en", "en-GB"], description: "English (espeak-ng)", version: "1.52"),
            WyomingVoice(name: "en_US-lessac-medium", languages: ["en-US"], description: "lessac (Piper)"),
        ]
    }

    func render(_ speech: WyomingSpeech) async throws(ErrorResponse) -> SpeechRender {
        if speech.voice == "nobody" {
            throw ErrorResponse(code: "notFound", message: "no voice is called 'nobody'", field: "voice")
        }
        if speech.text.allSatisfy(\.isWhitespace) {
            throw ErrorResponse(code: "outOfRange", message: "the text is empty", field: "text")
        }
        state.withLock { $0.rendered.append(speech) }
        let samples = Self.samples(for: speech.text)
        return SpeechRender(format: format, textField: "text", audio: .replaying([PCMChunk(samples: samples)]))
    }

    func announce(
        _ recording: WyomingRecording, output: String, origin: AnnouncementOrigin
    ) async throws(ErrorResponse) -> AnnouncementEvent {
        if output == "nowhere" {
            throw ErrorResponse(code: "notFound", message: "no output 'nowhere'", field: "output")
        }
        state.withLock { $0.announced.append((recording, output, origin)) }
        return AnnouncementEvent(
            type: .finished, id: "a1", text: "", priority: .default, timestamp: Date(), success: true,
            reason: .completed, output: output)
    }

    static func samples(for text: String) -> [Int16] {
        (0..<(text.count * 10)).map { Int16(truncatingIfNeeded: $0 &* 37) }
    }
}
