import EngineWorkers
import EspeakEngine
import Foundation
import Logging
import SpeakTestSupport
import SpeechModel
import SpeechRendering

/// Measures EspeakEngine against libespeak-ng called directly, in the same run:
/// time to first chunk and audio seconds per CPU second. `--calibrate-pitch` instead measures
/// espeak-ng's pitch parameter → F0 ratio table that `PitchCalibration` uses; `--loudness` the
/// cost of the loudness stage against rendering.
@main
struct EngineBenchmark {
    static let corpus = [
        "Platform four.",
        "The next train to the city centre departs from platform four.",
        "Please mind the gap between the train and the platform edge.",
        "Attention please: the ten fifteen service to Lisboa Santa Apolónia is delayed by approximately twenty minutes. We apologise for the inconvenience.",
        "Ticket number 07402, please go to counter three.",
        "Welcome. This kiosk is out of order; please use the machine next to the entrance, or ask a member of staff for help.",
    ]

    static func main() async throws {
        let arguments = CommandLine.arguments.dropFirst()
        var configuration = EspeakEngine.Configuration()
        if let index = arguments.firstIndex(of: "--chunk-ms"), let value = Int(arguments[arguments.index(after: index)])
        {
            configuration.chunkMilliseconds = value
        }
        let engine = try await EspeakEngine(configuration: configuration) { SimpleResolver(voices: $0) }
        if arguments.contains("--engine-only") {
            // For profilers: the engine's path alone, for a while.
            for _ in 0..<200 {
                for text in corpus { for try await _ in engine.render(Utterance(text)) {} }
            }
        } else if arguments.contains("--calibrate-pitch") {
            try await calibratePitch(engine)
        } else if arguments.contains("--loudness") {
            try await LoudnessBenchmark.run(engine, rounds: arguments.first.flatMap(Int.init) ?? 20)
        } else {
            let rounds = arguments.first.flatMap(Int.init) ?? 20
            print("chunks after the first: \(configuration.chunkMilliseconds) ms")
            try await benchmark(engine, rounds: rounds)
        }
    }

    struct Totals {
        var firstChunks: [Double] = []
        var audioSeconds = 0.0
        var cpuSeconds = 0.0
        var wallSeconds = 0.0
    }

    /// The corpus with its second half raised in pitch: two spans, so the engine sends SSML.
    static var attributedCorpus: [Utterance] {
        corpus.map { text in
            let words = text.split(separator: " ", omittingEmptySubsequences: false)
            let half = words.count / 2
            return Utterance(spans: [
                Span(words[..<half].joined(separator: " ") + " "),
                Span(words[half...].joined(separator: " "), attributes: SpeechAttributes(pitch: 1.2)),
            ])
        }
    }

    /// Raw libespeak-ng over `inputs` (text, whether SSML), on the espeak thread.
    static func rawRound(
        _ engine: EspeakEngine, voice: String, inputs: [(text: String, isMarkup: Bool)], setVoiceEach: Bool = false
    ) async throws -> Totals {
        let sampleRate = Double(engine.format.sampleRate)
        return try await engine.runExclusively { () -> Totals in
            var totals = Totals()
            RawEspeak.prepare(voice: voice)
            let cpu = Clock.processCPUNanoseconds(), wall = Clock.monotonicNanoseconds()
            for input in inputs {
                if setVoiceEach { RawEspeak.setVoice(voice) }
                let run = RawEspeak.synthesize(input.text, ssml: input.isMarkup)
                totals.firstChunks.append(Double((run.firstChunk ?? run.start) - run.start) / 1e6)
                totals.audioSeconds += Double(run.sampleCount) / sampleRate
            }
            totals.cpuSeconds = Double(Clock.processCPUNanoseconds() - cpu) / 1e9
            totals.wallSeconds = Double(Clock.monotonicNanoseconds() - wall) / 1e9
            return totals
        }
    }

    /// A renderer over `utterances`, timed from `prepare` (validation and compilation, which the
    /// daemon does when it accepts an announcement) to the first chunk in the consumer.
    /// CPU is this process's: for a worker pool it leaves out the workers' own.
    static func engineRound(_ engine: some SpeechRenderer, utterances: [Utterance]) async throws -> Totals {
        let sampleRate = Double(engine.format.sampleRate)
        // The engine reloads its voice after `runExclusively`: render one utterance first so
        // the round measures steady state, as a daemon speaking one voice sees it.
        for try await _ in engine.render(try await engine.prepare(Utterance("Ready."))) {}
        var totals = Totals()
        let cpu = Clock.processCPUNanoseconds(), wall = Clock.monotonicNanoseconds()
        for utterance in utterances {
            let start = Clock.monotonicNanoseconds()
            var iterator = engine.render(try await engine.prepare(utterance)).makeAsyncIterator()
            var first: UInt64?
            var samples = 0
            while let chunk = try await iterator.next() {
                if first == nil { first = Clock.monotonicNanoseconds() }
                samples += chunk.samples.count
            }
            totals.firstChunks.append(Double((first ?? start) - start) / 1e6)
            totals.audioSeconds += Double(samples) / sampleRate
        }
        totals.cpuSeconds = Double(Clock.processCPUNanoseconds() - cpu) / 1e9
        totals.wallSeconds = Double(Clock.monotonicNanoseconds() - wall) / 1e9
        return totals
    }

    static func benchmark(_ engine: EspeakEngine, rounds: Int) async throws {
        let voice = "gmw/en"
        let plain = corpus.map { Utterance($0) }
        let attributed = attributedCorpus
        let plainText = corpus.map { (text: $0, isMarkup: false) }
        let plainInputs = try plain.map { try engine.espeakInput(for: $0) }.map {
            (text: $0.text, isMarkup: $0.isMarkup)
        }
        let attributedInputs = try attributed.map { try engine.espeakInput(for: $0) }.map {
            (text: $0.text, isMarkup: $0.isMarkup)
        }
        var raw = Totals(), rawVoiceEach = Totals(), rawPlainInputs = Totals(), speakd = Totals()
        var rawAttributed = Totals(), speakdAttributed = Totals(), pooled = Totals()
        // The daemon's path: one `speakd-engine-worker` (built beside this executable) per job.
        let worker = EngineWorkerPool.Launch.besideExecutable()
        let pool: EngineWorkerPool? =
            FileManager.default.isExecutableFile(atPath: worker)
            ? try await EngineWorkerPool(
                launch: .init(executable: worker, arguments: [], count: 1), engine: engine,
                logger: Logger(label: "bench"))
            : nil
        defer { pool?.shutdown() }
        // Warm-up: dictionaries loaded, caches filled, for both paths.
        _ = try await rawRound(engine, voice: voice, inputs: plainText)
        _ = try await engineRound(engine, utterances: plain + attributed)
        if let pool { _ = try await engineRound(pool, utterances: plain) }

        for _ in 0..<rounds {
            raw.add(try await rawRound(engine, voice: voice, inputs: plainText))
            rawVoiceEach.add(try await rawRound(engine, voice: voice, inputs: plainText, setVoiceEach: true))
            rawPlainInputs.add(try await rawRound(engine, voice: voice, inputs: plainInputs))
            speakd.add(try await engineRound(engine, utterances: plain))
            rawAttributed.add(try await rawRound(engine, voice: voice, inputs: attributedInputs))
            speakdAttributed.add(try await engineRound(engine, utterances: attributed))
            if let pool { pooled.add(try await engineRound(pool, utterances: plain)) }
        }

        let sampleRate = engine.format.sampleRate
        print("speakd-engine-bench: \(rounds) rounds × \(corpus.count) utterances, voice \(voice), \(sampleRate) Hz")
        print("")
        print(row("path", "first chunk median ms", "p90 ms", "audio s / CPU s", "audio s / wall s"))
        let rows = [
            ("raw libespeak-ng, plain text", raw), ("raw, voice set per utterance", rawVoiceEach),
            ("raw, the engine's input", rawPlainInputs), ("EspeakEngine", speakd),
            ("raw, engine's SSML (2 spans)", rawAttributed), ("EspeakEngine (2 spans)", speakdAttributed),
        ]
        for (name, totals) in rows + (pool == nil ? [] : [("EngineWorkerPool, 1 worker", pooled)]) {
            let cpuColumn =
                name.hasPrefix("EngineWorkerPool") ? "-" : format(totals.audioSeconds / totals.cpuSeconds, 0)
            print(
                row(
                    name, format(median(totals.firstChunks), 3), format(percentile(totals.firstChunks, 0.9), 3),
                    cpuColumn, format(totals.audioSeconds / totals.wallSeconds, 0)))
        }
        print("")
        func report(_ label: String, _ engine: Totals, _ raw: Totals) {
            let throughput = (engine.audioSeconds / engine.cpuSeconds) / (raw.audioSeconds / raw.cpuSeconds)
            let firstChunkDelta = median(engine.firstChunks) - median(raw.firstChunks)
            print(
                "\(label): rendering ratio (audio s per CPU s) \(format(throughput, 3)) (goal ≥ 0.9), first chunk median \(format(firstChunkDelta, 3)) ms over raw (goal ≤ 0.5 ms)"
            )
        }
        report("plain utterances, EspeakEngine / raw plain text", speakd, raw)
        report("two-span utterances, EspeakEngine / raw with the same SSML", speakdAttributed, rawAttributed)
        if pool != nil {
            print(
                "plain utterances, worker pool: first chunk median \(format(median(pooled.firstChunks) - median(speakd.firstChunks), 3)) ms over the in-process EspeakEngine (goal ≤ 0.5 ms)"
            )
        } else {
            print("worker pool: not measured (no speakd-engine-worker beside this executable; build it in release)")
        }
    }

    /// Prints espeak-ng's pitch parameter → median F0 ratio (relative to 50) for several voices.
    static func calibratePitch(_ engine: EspeakEngine) async throws {
        let samples: [(voice: String, text: String)] = [
            ("gmw/en", "The next train to the city centre departs from platform four."),
            ("gmw/en-US", "The next train to the city centre departs from platform four."),
            ("roa/pt", "O próximo comboio para Lisboa parte da linha quatro."),
            ("roa/es", "El próximo tren para Madrid sale del andén cuatro."),
        ]
        let parameters = Array(stride(from: 0, through: 100, by: 5))
        let sampleRate = engine.format.sampleRate
        var ratios: [Int: [Double]] = [:]
        for (voice, text) in samples {
            let f0s = try await engine.runExclusively { () -> [Int: Double] in
                var result: [Int: Double] = [:]
                for parameter in parameters {
                    RawEspeak.prepare(voice: voice, pitch: parameter)
                    let run = RawEspeak.synthesize(text, keepSamples: true)
                    result[parameter] = AudioAnalysis(samples: run.samples, sampleRate: sampleRate).medianF0()
                }
                return result
            }
            guard let base = f0s[50] else { continue }
            print("\(voice): F0 at 50 = \(format(base, 1)) Hz")
            for parameter in parameters {
                guard let f0 = f0s[parameter] else { continue }
                ratios[parameter, default: []].append(f0 / base)
                print("  \(parameter): \(format(f0, 1)) Hz  ×\(format(f0 / base, 3))")
            }
        }
        print("\nmean ratio per parameter (PitchCalibration.table):")
        let rows = parameters.compactMap { parameter -> String? in
            guard let values = ratios[parameter], !values.isEmpty else { return nil }
            return "(\(parameter), \(format(values.reduce(0, +) / Double(values.count), 3)))"
        }
        print(rows.joined(separator: ", "))
    }

    static func row(_ columns: String...) -> String {
        columns.enumerated().map { index, column in
            let width = index == 0 ? 32 : 22
            return column.padding(toLength: max(width, column.count), withPad: " ", startingAt: 0)
        }.joined()
    }

    static func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

    static func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
    }
}

extension EngineBenchmark.Totals {
    mutating func add(_ other: Self) {
        firstChunks += other.firstChunks
        audioSeconds += other.audioSeconds
        cpuSeconds += other.cpuSeconds
        wallSeconds += other.wallSeconds
    }
}

/// Picks espeak-ng's own voice for a tag: exact match, then the language alone; `en` by default.
struct SimpleResolver: VoiceResolving {
    let voices: [VoiceInfo]

    func voice(for tag: LanguageTag?) throws(SpeechInputError) -> VoiceInfo {
        let wanted = (tag?.canonical ?? "en").lowercased()
        let language = String(wanted.split(separator: "-").first ?? "")
        if let voice = voices.first(where: { $0.languages.contains { $0.lowercased() == wanted } })
            ?? voices.first(where: { $0.languages.contains { $0.lowercased() == language } })
        {
            return voice
        }
        throw .notFound(field: "language", "no voice for '\(wanted)'")
    }

    /// espeak-ng's own lists: the benchmark never lists voices.
    var servedVoices: [VoiceInfo] { voices }
}
