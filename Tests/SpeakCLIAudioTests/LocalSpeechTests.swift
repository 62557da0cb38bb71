import AudioOutput
import Foundation
import SpeakTestSupport
import SpeechRendering
import Testing

/// The `speak` executable with no daemon: real engine, real PulseAudio server, monitor recorded.
@Suite(.serialized, .timeLimit(.minutes(2)))
final class LocalSpeechTests {
    /// The runtime directory `speak` sees, where audio clients may create files; one per test,
    /// removed after it.
    private let runtime = FileManager.default.temporaryDirectory.appendingPathComponent("speak-test-\(UUID())")

    deinit { try? FileManager.default.removeItem(at: runtime) }

    /// An environment where no daemon answers and audio goes to `server`.
    private func environment(_ server: PulseAudioServer? = nil) -> [String: String] {
        var environment = ["XDG_RUNTIME_DIR": runtime.path, "SPEAKD_SOCKET": "", "SPEAKD_HTTP": ""]
        if let server { environment.merge(server.environment) { $1 } }
        return environment
    }

    /// Speaks through `server` and returns what its null sink played.
    private func speakRecorded(_ arguments: [String], on server: PulseAudioServer) async throws
        -> (BuiltProduct.Result, AudioAnalysis)
    {
        let recorder = try await MonitorRecorder.start(server)
        let result = try await BuiltProduct.run("speak", arguments, environment: environment(server))
        try await Task.sleep(for: .milliseconds(300))
        let samples = await recorder.stop()
        return (result, AudioAnalysis(samples: samples, sampleRate: server.sampleRate))
    }

    /// Runs `body` with a private PulseAudio server, stopped afterwards whatever happens.
    private static func withServer(_ body: (PulseAudioServer) async throws -> Void) async throws {
        let server = try await PulseAudioServer.start()
        do {
            try await body(server)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test func speaksThroughPulseAudioWithoutADaemon() async throws {
        try await Self.withServer { server in
            let (result, heard) = try await speakRecorded(
                ["--pitch", "1.4", "--lang", "pt-PT", "--wait", "Olá, bom dia"], on: server)
            #expect(result.status == 0, "\(result.standardError)")
            let finished = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
            #expect(finished?["success"] as? Bool == true)
            #expect(finished?["reason"] as? String == "completed")
            #expect(finished?["voice"] as? String == "roa/pt")
            // In-process events carry the daemon's timestamp format: ISO 8601 with milliseconds.
            let timestamp = finished?["timestamp"] as? String ?? ""
            #expect(timestamp.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#) != nil, "\(timestamp)")
            let sounding = heard.soundingDuration()
            #expect(sounding > 0.4 && sounding < 3, "heard \(sounding) s of speech")
        }
    }

    @Test func pitchIsHeardAsAnF0Ratio() async throws {
        try await Self.withServer { server in
            let text = "The next train to the airport leaves from platform seven."
            let (normal, normalHeard) = try await speakRecorded(["--pitch", "1.0", text], on: server)
            let (high, highHeard) = try await speakRecorded(["--pitch", "1.4", text], on: server)
            #expect(normal.status == 0 && high.status == 0)
            let f0Normal = try #require(normalHeard.medianF0())
            let f0High = try #require(highHeard.medianF0())
            let ratio = f0High / f0Normal
            #expect(abs(ratio - 1.4) <= 1.4 * 0.05, "measured F0 ratio \(ratio) (\(f0High) / \(f0Normal) Hz)")
        }
    }

    @Test func punctuationAndSpellOutAreHeard() async throws {
        try await Self.withServer { server in
            let text = "Gate four, then left; then right."
            let (_, silent) = try await speakRecorded(["--no-punctuation", text], on: server)
            let (_, spoken) = try await speakRecorded(["--punctuation", text], on: server)
            // "comma" and "semicolon" are spoken: clearly longer than the same text without them.
            #expect(
                spoken.soundingDuration() > silent.soundingDuration() + 0.4,
                "punctuation \(spoken.soundingDuration()) s vs none \(silent.soundingDuration()) s")

            // Spelled out, a word becomes its letter names, each on its own: far longer than the word,
            // and at least as long as the letter names read as one phrase.
            let (_, spelled) = try await speakRecorded(["--spell-out", "Lisboa"], on: server)
            let (_, word) = try await speakRecorded(["Lisboa"], on: server)
            let (_, letters) = try await speakRecorded(["L I S B O A"], on: server)
            #expect(
                spelled.soundingDuration() > 2 * word.soundingDuration(),
                "spelled \(spelled.soundingDuration()) s vs word \(word.soundingDuration()) s")
            #expect(
                spelled.soundingDuration() > 0.9 * letters.soundingDuration(),
                "spelled \(spelled.soundingDuration()) s vs letter names \(letters.soundingDuration()) s")
        }
    }

    @Test func portugueseSpanInsideEnglishIsSpokenWithThePortugueseVoice() async throws {
        try await Self.withServer { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            // The same attributed utterance with the span in Portuguese and in English, rendered to WAV.
            var rendered: [String: [Int16]] = [:]
            for language in ["pt-PT", "en-GB"] {
                let json = directory.appendingPathComponent("\(language).json")
                try Data(
                    #"{"spans":[{"text":"Next train to "},{"text":"Lisboa Santa Apolónia","language":"\#(language)"}],"language":"en-GB"}"#
                        .utf8
                ).write(to: json)
                let wav = directory.appendingPathComponent("\(language).wav")
                let result = try await BuiltProduct.run(
                    "speak", ["--json", json.path, "--output", wav.path], environment: environment())
                #expect(result.status == 0, "\(result.standardError)")
                rendered[language] = try WAVReader(contentsOf: wav).samples
            }
            // What was heard of the pt-PT utterance is, sample for sample, the Portuguese rendering
            // (the null sink passes audio through at gain ≈ 0.98), and not the English one.
            let json = directory.appendingPathComponent("pt-PT.json")
            let (result, heard) = try await speakRecorded(["--json", json.path], on: server)
            #expect(result.status == 0, "\(result.standardError)")
            let portuguese = Self.similarity(heard.samples, try #require(rendered["pt-PT"]))
            let english = Self.similarity(heard.samples, try #require(rendered["en-GB"]))
            #expect(portuguese > 0.9, "heard vs Portuguese rendering: \(portuguese)")
            #expect(english < portuguese - 0.2, "heard vs English rendering: \(english), Portuguese \(portuguese)")
        }
    }

    /// How well a stretch of `reference` inside the second span (1.3 s after its onset) is found in
    /// `recording`: the best normalised correlation within ±0.4 s of the same place.
    private static func similarity(_ recording: [Int16], _ reference: [Int16], sampleRate: Int = 22050) -> Double {
        func onset(_ samples: [Int16]) -> Int { samples.firstIndex { abs(Int($0)) > 300 } ?? 0 }
        let window = 4096
        let offset = sampleRate * 13 / 10
        let referenceWindow = (onset(reference) + offset)..<(onset(reference) + offset + window)
        guard referenceWindow.upperBound <= reference.count else { return 0 }
        return AudioAnalysis(samples: recording, sampleRate: sampleRate).bestCorrelation(
            of: reference[referenceWindow], near: onset(recording) + offset, within: sampleRate * 4 / 10)
    }

    @Test func readsStandardInputAndWritesWAV() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).wav")
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await BuiltProduct.run(
            "speak", ["--output", file.path], environment: environment(), standardInput: Data("Hello".utf8))
        #expect(result.status == 0, "\(result.standardError)")
        let wav = try WAVReader(contentsOf: file)
        #expect(wav.sampleRate == 22050)
        let audio = AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate)
        #expect(audio.soundingDuration() > 0.2)
    }

    /// In-process speech is played at speakd's loudness: −16 LUFS unless `--loudness` says
    /// otherwise, measured on the WAV it writes (the same chunks it plays) with libebur128.
    @Test func speechIsAtTheDaemonsLoudness() async throws {
        let text = "Attention please. The train now standing at platform nine is for the coast."
        func loudness(_ arguments: [String]) async throws -> (lufs: Double?, peak: Int) {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).wav")
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try await BuiltProduct.run(
                "speak", arguments + ["--output", file.path, text], environment: environment())
            #expect(result.status == 0, "\(result.standardError)")
            let wav = try WAVReader(contentsOf: file)
            let format = AudioFormat(sampleRate: wav.sampleRate, channels: wav.channels)
            return (
                LoudnessMeter.loudness(of: wav.samples, format: format), wav.samples.map { abs(Int($0)) }.max() ?? 0
            )
        }
        let byDefault = try await loudness([])
        #expect(abs((byDefault.lufs ?? 0) - -16) <= 1, "default: \(String(describing: byDefault.lufs)) LUFS")
        let quiet = try await loudness(["--loudness", "-23"])
        #expect(abs((quiet.lufs ?? 0) - -23) <= 1, "-23: \(String(describing: quiet.lufs)) LUFS")
        // Volume 2.0 is 6 dB more, under the limiter: nothing clips.
        let loud = try await loudness(["--volume", "2"])
        #expect(loud.peak < 32767, "clipped at volume 2")
        #expect((loud.lufs ?? 0) > (byDefault.lufs ?? 0) + 3, "volume 2: \(String(describing: loud.lufs)) LUFS")
        // Off: the engine's own level, several dB under the target.
        let off = try await loudness(["--loudness", "off"])
        #expect((off.lufs ?? 0) < -18, "off: \(String(describing: off.lufs)) LUFS")

        let unwritten = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).wav")
        defer { try? FileManager.default.removeItem(at: unwritten) }
        let refused = try await BuiltProduct.run(
            "speak", ["--loudness", "-3", "--output", unwritten.path, "hi"], environment: environment())
        #expect(refused.status == 2)
        #expect(refused.standardError.contains("--loudness"))
        #expect(!FileManager.default.fileExists(atPath: unwritten.path))
    }

    @Test func failedAudioExitsOne() async throws {
        var environment = environment()
        environment["PULSE_SERVER"] = "unix:/nonexistent/speakd-test/native"
        let result = try await BuiltProduct.run(
            "speak", ["--audio", "pulse", "--wait", "hello"], environment: environment)
        #expect(result.status == 1)
        #expect(result.standardError.contains("pulse"))
        #expect(result.standardOutput.contains("\"failed\""))
    }

    @Test func unknownVoiceAndEmptyInputExitTwo() async throws {
        let unknown = try await BuiltProduct.run(
            "speak", ["--audio", "null", "--lang", "xx-QQ", "hi"], environment: environment())
        #expect(unknown.status == 2)
        #expect(unknown.standardError.contains("xx-QQ"))
        let empty = try await BuiltProduct.run(
            "speak", ["--audio", "null"], environment: environment(), standardInput: Data())
        #expect(empty.status == 2)
        #expect(empty.standardError.contains("nothing to speak"))
    }

    @Test func voicesListsTagsAndResolvesOverrides() async throws {
        let all = try await BuiltProduct.run("speak", ["voices"], environment: environment())
        #expect(all.status == 0)
        #expect(all.standardOutput.contains("roa/pt"))
        let spanish = try await BuiltProduct.run(
            "speak", ["voices", "--lang", "es-AR"], environment: environment())
        #expect(spanish.standardOutput.contains("roa/es-419"), "\(spanish.standardOutput)")
        let malformed = try await BuiltProduct.run(
            "speak", ["voices", "--lang", "en-"], environment: environment())
        #expect(malformed.status == 2)
    }

    @Test func aTextThatCrashesTheEngineIsAClearErrorNotABacktrace() async throws {
        let crasher = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/espeak-crashers/dotted-abbreviations.txt"), encoding: .utf8)
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("speak-crash-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let result = try await BuiltProduct.run(
            "speak", ["--output", output, crasher], environment: environment())
        #expect(result.status == 1)
        // Its one line says it all: none of the pool's log lines (a daemon's journal's) come with it.
        #expect(
            result.standardError == "speak: --output \(output): engine worker crashed: SIGABRT\n",
            "\(result.standardError)")
        #expect(!result.standardError.contains("Backtrace"))
        let fine = try await BuiltProduct.run(
            "speak", ["--output", output, "Still here"], environment: environment())
        #expect(fine.status == 0)
    }
}
