import Foundation
import SpeakTestSupport
import Testing

/// The `speak` executable with no daemon: real engine, real PulseAudio server, monitor recorded.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct LocalSpeechTests {
    /// An environment where no daemon answers and audio goes to `server`.
    private static func environment(_ server: PulseAudioServer? = nil) -> [String: String] {
        let runtime = FileManager.default.temporaryDirectory.appendingPathComponent("speak-test-\(UUID())").path
        var environment = ["XDG_RUNTIME_DIR": runtime, "SPEAKD_SOCKET": "", "SPEAKD_HTTP": ""]
        if let server { environment.merge(server.environment) { $1 } }
        return environment
    }

    /// Speaks through `server` and returns what its null sink played.
    private static func speakRecorded(_ arguments: [String], on server: PulseAudioServer) async throws
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
            let (result, heard) = try await Self.speakRecorded(
                ["--pitch", "1.4", "--lang", "pt-PT", "--wait", "Olá, bom dia"], on: server)
            #expect(result.status == 0, "\(result.standardError)")
            let finished = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
            #expect(finished?["success"] as? Bool == true)
            #expect(finished?["reason"] as? String == "completed")
            #expect(finished?["voice"] as? String == "roa/pt")
            let sounding = heard.soundingDuration()
            #expect(sounding > 0.4 && sounding < 3, "heard \(sounding) s of speech")
        }
    }

    @Test func pitchIsHeardAsAnF0Ratio() async throws {
        try await Self.withServer { server in
            let text = "The next train to the airport leaves from platform seven."
            let (normal, normalHeard) = try await Self.speakRecorded(["--pitch", "1.0", text], on: server)
            let (high, highHeard) = try await Self.speakRecorded(["--pitch", "1.4", text], on: server)
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
            let (_, silent) = try await Self.speakRecorded(["--no-punctuation", text], on: server)
            let (_, spoken) = try await Self.speakRecorded(["--punctuation", text], on: server)
            // "comma" and "semicolon" are spoken: clearly longer than the same text without them.
            #expect(
                spoken.soundingDuration() > silent.soundingDuration() + 0.4,
                "punctuation \(spoken.soundingDuration()) s vs none \(silent.soundingDuration()) s")

            // Spelled out, a word becomes its letter names, each on its own: far longer than the word,
            // and at least as long as the letter names read as one phrase.
            let (_, spelled) = try await Self.speakRecorded(["--spell-out", "Lisboa"], on: server)
            let (_, word) = try await Self.speakRecorded(["Lisboa"], on: server)
            let (_, letters) = try await Self.speakRecorded(["L I S B O A"], on: server)
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
            func spans(_ language: String) -> Data {
                Data(
                    #"{"spans":[{"text":"Next train to "},{"text":"Lisboa Santa Apolónia","language":"\#(language)"}],"language":"en-GB"}"#
                        .utf8)
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            var heard: [String: AudioAnalysis] = [:]
            for language in ["pt-PT", "en-GB"] {
                let file = directory.appendingPathComponent("\(language).json")
                try spans(language).write(to: file)
                let (result, audio) = try await Self.speakRecorded(["--json", file.path], on: server)
                #expect(result.status == 0, "\(result.standardError)")
                heard[language] = audio
            }
            // The same word with Portuguese rules and voice sounds different from its English reading:
            // the voices differ in F0, and the durations differ too.
            let portuguese = try #require(heard["pt-PT"]), english = try #require(heard["en-GB"])
            let f0pt = try #require(portuguese.medianF0()), f0en = try #require(english.medianF0())
            let durationRatio = portuguese.soundingDuration() / english.soundingDuration()
            #expect(
                abs(f0pt / f0en - 1) > 0.03 || abs(durationRatio - 1) > 0.1,
                "pt-PT span F0 \(f0pt) Hz vs en-GB \(f0en) Hz, duration ratio \(durationRatio)")
        }
    }

    @Test func readsStandardInputAndWritesWAV() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).wav")
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await BuiltProduct.run(
            "speak", ["--output", file.path], environment: Self.environment(), standardInput: Data("Hello".utf8))
        #expect(result.status == 0, "\(result.standardError)")
        let wav = try WAVReader(contentsOf: file)
        #expect(wav.sampleRate == 22050)
        let audio = AudioAnalysis(samples: wav.samples, sampleRate: wav.sampleRate)
        #expect(audio.soundingDuration() > 0.2)
    }

    @Test func failedAudioExitsOne() async throws {
        var environment = Self.environment()
        environment["PULSE_SERVER"] = "unix:/nonexistent/speakd-test/native"
        let result = try await BuiltProduct.run(
            "speak", ["--audio", "pulse", "--wait", "hello"], environment: environment)
        #expect(result.status == 1)
        #expect(result.standardError.contains("pulse"))
        #expect(result.standardOutput.contains("\"failed\""))
    }

    @Test func unknownVoiceAndEmptyInputExitTwo() async throws {
        let unknown = try await BuiltProduct.run(
            "speak", ["--audio", "null", "--lang", "xx-QQ", "hi"], environment: Self.environment())
        #expect(unknown.status == 2)
        #expect(unknown.standardError.contains("xx-QQ"))
        let empty = try await BuiltProduct.run(
            "speak", ["--audio", "null"], environment: Self.environment(), standardInput: Data())
        #expect(empty.status == 2)
        #expect(empty.standardError.contains("nothing to speak"))
    }

    @Test func voicesListsTagsAndResolvesOverrides() async throws {
        let all = try await BuiltProduct.run("speak", ["voices"], environment: Self.environment())
        #expect(all.status == 0)
        #expect(all.standardOutput.contains("roa/pt"))
        let spanish = try await BuiltProduct.run(
            "speak", ["voices", "--lang", "es-AR"], environment: Self.environment())
        #expect(spanish.standardOutput.contains("roa/es-419"), "\(spanish.standardOutput)")
        let malformed = try await BuiltProduct.run(
            "speak", ["voices", "--lang", "en-"], environment: Self.environment())
        #expect(malformed.status == 2)
    }
}
