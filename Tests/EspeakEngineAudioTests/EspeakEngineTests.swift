import Foundation
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Testing

@testable import EspeakEngine

/// The engine tests share one engine: espeak-ng's state is process-global.
enum Engines {
    static let shared: Task<EspeakEngine, any Error> = Task {
        try await EspeakEngine(configuration: .init(variantsDirectory: variantsDirectory)) {
            TestVoiceResolver(voices: $0)
        }
    }

    static var variantsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Voices/variants").path
    }

    static func engine() async throws -> EspeakEngine { try await shared.value }

    /// Another engine over the same data, for settings that live in the configuration.
    static func engine(_ configure: (inout EspeakEngine.Configuration) -> Void, variant: String? = nil) async throws
        -> EspeakEngine
    {
        var configuration = EspeakEngine.Configuration(variantsDirectory: variantsDirectory)
        configure(&configuration)
        return try await EspeakEngine(configuration: configuration) { TestVoiceResolver(voices: $0, variant: variant) }
    }
}

extension EspeakEngine.Rendering {
    var audio: AudioAnalysis { AudioAnalysis(samples: samples, sampleRate: format.sampleRate) }
}

func tag(_ string: String) -> LanguageTag { try! LanguageTag(string) }

@Suite("EspeakEngine", .serialized, .timeLimit(.minutes(1)))
struct EspeakEngineTests {
    @Test func streamsChunksAsTheyAreSynthesised() async throws {
        let engine = try await Engines.engine()
        #expect(engine.format == AudioFormat(sampleRate: 22050, channels: 1))
        var chunks: [PCMChunk] = []
        for try await chunk in engine.render(Utterance("The next train to the city centre departs from platform four."))
        {
            chunks.append(chunk)
        }
        let audio = AudioAnalysis(samples: chunks.flatMap(\.samples), sampleRate: 22050)
        #expect(audio.duration > 2)
        #expect(audio.rms > 0.02)
        // espeak-ng's first block (about 50 ms) is passed on by itself, ahead of the rest.
        #expect(chunks.count > 3)
        #expect(Double(chunks[0].samples.count) / 22050 < 0.1)
    }

    @Test func missingDataIsAnErrorNotAnExit() async throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("speakd-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        do {
            _ = try await EspeakEngine(configuration: .init(dataPath: empty.path)) { TestVoiceResolver(voices: $0) }
            Issue.record("an engine over an empty data directory was created")
        } catch let error as EspeakError {
            #expect(error.isMissingData)
            #expect(error.description.contains(empty.path))
            #expect(!error.message.isEmpty)
        }
        // The shared engine initialises espeak-ng again and still speaks.
        let rendering = try await Engines.engine().renderAll(Utterance("Still here."))
        #expect(rendering.audio.duration > 0.5)
    }

    static let long = Utterance(
        String(repeating: "This announcement is very long and will not be heard to the end. ", count: 40))

    /// How the last synthesis ended, read once the espeak thread has finished with it.
    private func lastSynthesis(_ engine: EspeakEngine) async throws -> (producedSamples: Int, aborted: Bool) {
        // Jobs run in order: this one starts after the rendering's job has returned.
        try await engine.runExclusively {}
        return try #require(engine.lastSynthesis.value)
    }

    @Test func cancellingTheConsumerAbortsSynthesis() async throws {
        let engine = try await Engines.engine()
        let consumer = Task {
            var received = 0
            for try await chunk in engine.render(Self.long) {
                received += chunk.samples.count
                if received > 22050 { withUnsafeCurrentTask { $0?.cancel() } }
            }
            return received
        }
        let received = try await consumer.value
        let record = try await lastSynthesis(engine)
        #expect(record.aborted)
        // The whole text is over two minutes of speech; synthesis stopped within seconds.
        #expect(record.producedSamples < 22050 * 20)
        #expect(received <= record.producedSamples)

        // Nothing of the aborted text is left to open the next utterance: it sounds like a
        // fresh rendering (espeak-ng's output varies by a few milliseconds between renderings).
        let next = try await engine.renderAll(Utterance("Next please."))
        #expect(try await !lastSynthesis(engine).aborted)
        let again = try await engine.renderAll(Utterance("Next please."))
        #expect(abs(next.audio.duration - again.audio.duration) < 0.05)
        #expect(abs(next.audio.soundingDuration() - again.audio.soundingDuration()) < 0.05)
        #expect(next.audio.duration > 0.5)
    }

    @Test func droppingTheStreamAbortsSynthesis() async throws {
        let engine = try await Engines.engine()
        do {
            var iterator = engine.render(Self.long).makeAsyncIterator()
            let first = try await iterator.next()
            #expect(first != nil)
        }
        let record = try await lastSynthesis(engine)
        #expect(record.aborted)
        #expect(record.producedSamples < 22050 * 20)
    }

    @Test func aCompleteRenderingIsNotAborted() async throws {
        let engine = try await Engines.engine()
        let rendering = try await engine.renderAll(Utterance("Platform four."))
        let record = try await lastSynthesis(engine)
        #expect(!record.aborted)
        #expect(record.producedSamples == rendering.samples.count)
    }
}

extension EspeakEngineTests {
    @Test func aMissingVariantsDirectoryIsAnError() async throws {
        let runtime = FileManager.default.temporaryDirectory.appendingPathComponent(
            "speakd-runtime-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: runtime) }
        do {
            _ = try await EspeakEngine(
                configuration: .init(variantsDirectory: "/nonexistent/variants", runtimeDirectory: runtime.path)
            ) {
                TestVoiceResolver(voices: $0)
            }
            Issue.record("an engine with a missing variants directory was created")
        } catch let error as EspeakError {
            #expect(error.description.contains("/nonexistent/variants"))
        }
    }

    @Test func variantsAreServedFromAPrivateDataDirectory() async throws {
        let engine = try await Engines.engine()
        #expect(engine.dataPath.hasPrefix(FileManager.default.temporaryDirectory.path))
        let variant = URL(fileURLWithPath: engine.dataPath).appendingPathComponent("voices/!v/speakd-kiosk")
        let installed = try String(contentsOf: variant, encoding: .utf8)
        let source = try String(
            contentsOf: URL(fileURLWithPath: Engines.variantsDirectory).appendingPathComponent("speakd-kiosk"),
            encoding: .utf8)
        #expect(installed == source)
        // espeak-ng's own variants stay available next to the project's.
        #expect(
            FileManager.default.fileExists(
                atPath: URL(fileURLWithPath: engine.dataPath).appendingPathComponent("voices/!v/m3").path))
    }
}

extension EspeakEngineTests {
    @Test func concurrentRendersTakeTurnsOnTheEspeakThread() async throws {
        let engine = try await Engines.engine()
        let texts = [
            "Platform one.", "The next train departs from platform two.", "Gate three is now closed, thank you.",
        ]
        var alone: [Double] = []
        for text in texts { alone.append(try await engine.renderAll(Utterance(text)).audio.soundingDuration()) }
        let together = try await withThrowingTaskGroup(of: (Int, Double).self) { group in
            for (index, text) in texts.enumerated() {
                group.addTask { (index, try await engine.renderAll(Utterance(text)).audio.soundingDuration()) }
            }
            var durations = [Double](repeating: 0, count: texts.count)
            for try await (index, duration) in group { durations[index] = duration }
            return durations
        }
        for index in texts.indices {
            #expect(
                abs(together[index] - alone[index]) < 0.05, "\(texts[index]): \(together[index]) s vs \(alone[index]) s"
            )
        }
    }

    @Test func anEmptyUtteranceEnds() async throws {
        let engine = try await Engines.engine()
        let rendering = try await engine.renderAll(Utterance(""))
        #expect(rendering.audio.soundingDuration() == 0)
    }
}

extension EspeakEngineTests {
    @Test func anUtteranceWithoutSpansEnds() async throws {
        let engine = try await Engines.engine()
        let rendering = try await engine.renderAll(
            Utterance(spans: [], defaults: SpeechAttributes(language: tag("pt-PT"))))
        #expect(rendering.audio.soundingDuration() == 0)
        #expect(throws: SpeechInputError.self) {
            try engine.prepare(Utterance(spans: [], defaults: SpeechAttributes(language: tag("xx"))))
        }
    }
}
