import ArgumentParser
import AudioOutput
import EngineWorkers
import EspeakEngine
import Foundation
import Logging
import SpeakAPI
import SpeechModel
import SpeechRendering

/// Speech in the `speak` process itself, for machines where no daemon runs.
enum LocalSpeech {
    /// The loudness of speech in this process unless `--loudness` says otherwise: speakd's default.
    static let defaultLoudness = -16.0

    /// Parses an audio sink spec; the error names where it came from.
    static func sinkSpec(_ value: String, flag: String) throws -> AudioSinkSpec {
        do {
            return try AudioSinkSpec(parsing: value)
        } catch {
            throw ValidationError("\(flag) \(value): \(error.message)")
        }
    }

    /// One engine worker over the discovered voices directory, as the daemon runs them: a text
    /// that crashes espeak-ng ends the worker, and `speak` reports it instead of crashing.
    static func engine() async throws -> EngineWorkerPool {
        let voices = VoicesDirectory.discover()
        let engine = try await catalogEngine(voices)
        // The pool logs a worker's death (and its replacement's start) for a daemon's journal;
        // here the failure is speak's own error (`--output PATH: engine worker crashed: SIGABRT`),
        // so those lines show only when SPEAK_LOG_LEVEL asks for them.
        var logger = Logger(label: "speak")
        if ProcessInfo.processInfo.environment["SPEAK_LOG_LEVEL"] == nil { logger.logLevel = .critical }
        do {
            let launch = EngineWorkerPool.Launch(
                executable: EngineWorkerPool.Launch.besideExecutable(), arguments: [], count: 1)
            return try await EngineWorkerPool(launch: launch, engine: engine, logger: logger)
        } catch {
            throw SpeakFailure.notCompleted("the speech engine did not start: \(error)")
        }
    }

    /// espeak-ng in this process for voices and validation only; it renders nothing.
    static func catalogEngine(_ voices: VoicesDirectory? = VoicesDirectory.discover()) async throws -> EspeakEngine {
        do {
            return try await EspeakEngine(voices: voices, configuration: .init(loadsSynthesisAtStart: false))
        } catch {
            throw SpeakFailure.notCompleted("the speech engine did not start: \(error)")
        }
    }

    /// Validates and compiles `utterance` once (an unknown language is invalid input); the
    /// worker is sent the compiled input.
    private static func prepare(_ utterance: Utterance, on engine: EngineWorkerPool) throws -> PreparedUtterance {
        do {
            return try engine.prepare(utterance)
        } catch {
            throw SpeakFailure.invalidInput(Self.describe(error))
        }
    }

    /// The engine's chunks of `speech` at `loudness` LUFS (nil: the engine's own level) and its
    /// `volume`, under the peak limiter, as speakd plays them.
    ///
    /// The voice's gain is measured here, on the reference sentence speakd measures at its start:
    /// in a process that speaks once, that is one more rendering of about ten seconds of speech
    /// before the first sample.
    private static func loudSpeech(
        _ speech: PreparedUtterance, on engine: EngineWorkerPool, loudness: Double?
    ) async -> LimitedSpeech<AsyncThrowingStream<PCMChunk, any Error>> {
        let calibration = loudness.map { LoudnessCalibration(target: $0, renderer: engine) }
        let gain = await LoudnessCalibration.playbackGain(for: speech, calibration: calibration)
        return LimitedSpeech(
            engine.render(speech), limiter: gain.map { PeakLimiter(gain: $0, sampleRate: engine.format.sampleRate) })
    }

    /// Renders `utterance` into a WAV file at `loudness` LUFS (nil: the engine's own level).
    static func render(_ utterance: Utterance, toWAV path: String, loudness: Double?) async throws {
        let engine = try await engine()
        let speech = try prepare(utterance, on: engine)
        let sink = WAVFileSink(path: path, format: engine.format)
        do {
            let chunks = await loudSpeech(speech, on: engine, loudness: loudness)
            try await AudioPlayback().play(chunks, format: engine.format, on: sink)
            await sink.close()
        } catch {
            await sink.close()
            engine.shutdown()
            throw SpeakFailure.notCompleted("--output \(path): \(error)")
        }
        engine.shutdown()
    }

    /// Speaks `utterance` on the sink `spec` names at `loudness` LUFS (nil: the engine's own
    /// level) and returns its finished event.
    static func speak(
        _ utterance: Utterance, priority: AnnouncementPriority, on spec: AudioSinkSpec, loudness: Double?
    ) async throws -> AnnouncementEvent {
        let engine = try await engine()
        let speech = try prepare(utterance, on: engine)
        defer { engine.shutdown() }
        func finished(_ reason: FinishReason, detail: String? = nil) -> AnnouncementEvent {
            AnnouncementEvent(
                type: .finished, id: "local", text: utterance.text, priority: priority, timestamp: Date(),
                success: reason == .completed, reason: reason, voice: speech.voice, detail: detail)
        }
        let sink: any ReopenableAudioSink
        do {
            sink = try await spec.makeSink(format: engine.format)
        } catch {
            return finished(.failed, detail: "\(error)")
        }
        do {
            let chunks = await loudSpeech(speech, on: engine, loudness: loudness)
            try await AudioPlayback().play(chunks, format: engine.format, on: sink)
            await sink.close()
            return finished(.completed)
        } catch {
            await sink.close()
            return finished(error is CancellationError ? .cancelled : .failed, detail: "\(error)")
        }
    }

    /// One line of JSON, as the daemon's events read.
    static func json(_ event: AnnouncementEvent) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(event), as: UTF8.self)
    }

    private static func describe(_ error: SpeechInputError) -> String {
        // A plain-text utterance's language comes from --lang; spans name their own fields.
        if error.field == "language" {
            return "--lang: \(error.message)"
        }
        return error.description
    }
}
