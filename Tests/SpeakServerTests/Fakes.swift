import Foundation
import SpeakAPI
import SpeakServer
import SpeechModel
import Synchronization

/// A renderer that yields a fixed tone per span and knows a few languages, so validation failures
/// and WAV framing can be checked without the engine's process-global state.
struct ToneRenderer: SpeechRenderer {
    static let samplesPerSpan = 2_205
    let format = AudioFormat(sampleRate: 22_050)
    let knownLanguages: Set<String> = ["en", "en-GB", "pt-PT"]

    func render(_ utterance: Utterance) -> AsyncThrowingStream<PCMChunk, any Error> {
        AsyncThrowingStream { continuation in
            for _ in utterance.spans {
                let samples = (0..<Self.samplesPerSpan).map { Int16(sin(Double($0) * 0.1) * 8_000) }
                continuation.yield(PCMChunk(samples: samples))
            }
            continuation.finish()
        }
    }

    func validate(_ utterance: Utterance) async throws(SpeechInputError) {
        if let tag = utterance.defaults.language, !knownLanguages.contains(tag.canonical) {
            throw .notFound(field: "language", "no voice speaks '\(tag)'")
        }
        for (index, span) in utterance.spans.enumerated() {
            if let tag = span.attributes.language, !knownLanguages.contains(tag.canonical) {
                throw .notFound(field: "spans[\(index)].language", "no voice speaks '\(tag)'")
            }
        }
    }

    func voices() async throws -> [VoiceInfo] {
        [
            VoiceInfo(identifier: "gmw/en", name: "English", languages: ["en-GB", "en"]),
            VoiceInfo(identifier: "roa/pt", name: "Portuguese", languages: ["pt-PT", "pt"]),
        ]
    }
}

/// Health whose audio state a test can switch.
final class SwitchableHealth: HealthReporting {
    private let audioUp = Mutex(true)

    func setAudio(up: Bool) {
        audioUp.withLock { $0 = up }
    }

    func health() async -> HealthReport {
        let up = audioUp.withLock { $0 }
        return HealthReport(
            engine: .init(state: .ok, name: "tone"),
            audio: .init(state: up ? .ok : .unavailable, sink: "null", detail: up ? nil : "the sink went away"))
    }
}
