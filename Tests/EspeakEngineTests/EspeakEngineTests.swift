import Foundation
import SpeakTestSupport
import SpeechModel
import Testing

@testable import EspeakEngine

/// The engine tests share one engine: espeak-ng's state is process-global.
enum Engines {
    static let shared: Task<EspeakEngine, any Error> = Task {
        try await EspeakEngine(configuration: .init(variantsDirectory: variantsDirectory)) { TestVoiceResolver(voices: $0) }
    }

    static var variantsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Voices/variants").path
    }

    static func engine() async throws -> EspeakEngine { try await shared.value }
}

func analysis(_ rendering: EspeakEngine.Rendering) -> AudioAnalysis {
    AudioAnalysis(samples: rendering.samples, sampleRate: rendering.format.sampleRate)
}

@Suite("EspeakEngine", .serialized)
struct EspeakEngineTests {
    @Test func rendersSpeech() async throws {
        let engine = try await Engines.engine()
        #expect(engine.format.sampleRate == 22050)
        let rendering = try await engine.renderAll(Utterance("The next train departs from platform four."))
        let audio = analysis(rendering)
        print("duration", audio.duration, "f0", audio.medianF0() as Any, audio.soundingSegments())
        #expect(audio.duration > 1.5)
        #expect(audio.rms > 0.02)
    }
}
