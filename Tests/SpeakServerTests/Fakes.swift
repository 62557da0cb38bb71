import AnnouncementIntake
import Foundation
import SpeakAPI
import SpeakServer
import SpeechModel
import SpeechRendering
import Synchronization

/// A renderer that yields a fixed tone per span and knows a few languages, so validation failures
/// and WAV framing can be checked without the engine's process-global state. It counts what it
/// prepares and renders, and gives every preparation a serial number as its engine input, so a
/// test can tell which preparation reached which stage.
struct ToneRenderer: SpeechRenderer {
    static let samplesPerSpan = 2_205
    let format = AudioFormat(sampleRate: 22_050)
    let knownLanguages: Set<String> = ["en", "en-GB", "pt-PT"]
    let counts = Counts()

    /// How often `prepare` was called (its serial numbers count from 1), and the serial numbers
    /// of the preparations that were rendered.
    final class Counts: Sendable {
        private let state = Mutex((prepared: 0, rendered: [Int]()))

        var prepared: Int { state.withLock { $0.prepared } }
        var rendered: [Int] { state.withLock { $0.rendered } }

        func nextPreparation() -> Int {
            state.withLock {
                $0.prepared += 1
                return $0.prepared
            }
        }

        func render(_ serial: Int) { state.withLock { $0.rendered.append(serial) } }
    }

    func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        let serial = counts.nextPreparation()
        try utterance.validate()
        if let tag = utterance.defaults.language, !knownLanguages.contains(tag.canonical) {
            throw .notFound(field: "language", "no voice speaks '\(tag)'")
        }
        for (index, span) in utterance.spans.enumerated() {
            if let tag = span.attributes.language, !knownLanguages.contains(tag.canonical) {
                throw .notFound(field: "spans[\(index)].language", "no voice speaks '\(tag)'")
            }
        }
        let voices = utterance.spans.map { _ in VoiceInfo(identifier: "tone", name: "Tone", languages: ["en"]) }
        return PreparedUtterance(utterance: utterance, voices: voices, engineInput: serial)
    }

    func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<PCMChunk, any Error> {
        AsyncThrowingStream { continuation in
            do {
                counts.render(try prepared.input(as: Int.self))
            } catch {
                continuation.finish(throwing: error)
                return
            }
            for _ in prepared.utterance.spans {
                let samples = (0..<Self.samplesPerSpan).map { Int16(sin(Double($0) * 0.1) * 8_000) }
                continuation.yield(PCMChunk(samples: samples))
            }
            continuation.finish()
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
