import AudioOutput
import EspeakEngine
import Foundation
import SpeechModel
import SpeechRendering

/// The daemon's loudness stage against rendering: the gain and limiter every chunk passes
/// through, and the one-time calibration of a voice (a reference rendered and measured with
/// libebur128), each as a share of the CPU time the engine takes to render the same speech.
enum LoudnessBenchmark {
    static func run(_ engine: EspeakEngine, rounds: Int) async throws {
        // 1.6 is about the gain the default voice gets at -16 LUFS; 2.5 drives most peaks into
        // the limiter (volume 2.0 on top of that gain), its most expensive path.
        for gain in [1.6, 2.5] { try await run(engine, rounds: rounds, gain: gain) }
    }

    static func run(_ engine: EspeakEngine, rounds: Int, gain: Double) async throws {
        var renderCPU = 0.0
        var limiterCPU = 0.0
        var meterCPU = 0.0
        var audioSeconds = 0.0
        let utterances = EngineBenchmark.corpus.map { Utterance($0) }
        for round in 0...rounds {
            for utterance in utterances {
                var chunks: [[Int16]] = []
                let start = Clock.processCPUNanoseconds()
                for try await chunk in engine.render(utterance) { chunks.append(chunk.samples) }
                let rendered = Clock.processCPUNanoseconds()
                var limiter = PeakLimiter(gain: gain, sampleRate: engine.format.sampleRate)
                var kept = 0
                for index in chunks.indices {
                    limiter.process(&chunks[index])
                    kept &+= Int(chunks[index].last ?? 0)
                }
                let limited = Clock.processCPUNanoseconds()
                let meter = try LoudnessMeter(format: engine.format)
                for chunk in chunks { meter.add(chunk) }
                _ = meter.integratedLoudness
                let measured = Clock.processCPUNanoseconds()
                guard round > 0 else { continue }  // warm-up
                if kept == Int.min { print("") }  // keeps the limiter's work from being optimised away
                renderCPU += Double(rendered - start) / 1e9
                limiterCPU += Double(limited - rendered) / 1e9
                meterCPU += Double(measured - limited) / 1e9
                audioSeconds += Double(chunks.reduce(0) { $0 + $1.count }) / Double(engine.format.sampleRate)
            }
        }
        func percent(_ value: Double) -> String { String(format: "%.2f %%", 100 * value / renderCPU) }
        print("speakd-engine-bench --loudness: \(rounds) rounds × \(utterances.count) utterances, gain \(gain)")
        print(String(format: "render: %.3f CPU s for %.1f audio s", renderCPU, audioSeconds))
        print("gain + limiter on every chunk (per announcement): \(percent(limiterCPU)) of render CPU")
        print("libebur128 measuring the same audio (calibration, once per voice/pitch/rate): \(percent(meterCPU))")
    }
}
