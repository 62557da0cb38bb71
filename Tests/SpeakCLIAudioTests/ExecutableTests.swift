import Foundation
import SpeakTestSupport
import Testing

/// What a user of the built `speak` sees on its standard output and standard error, with no daemon.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ExecutableTests {
    /// Runs the built `speak` where no daemon answers; the runtime directory that audio clients
    /// may create in it is removed afterwards.
    private static func speak(_ arguments: [String], standardInput: Data? = nil) async throws -> BuiltProduct.Result {
        let runtime = FileManager.default.temporaryDirectory.appendingPathComponent("speak-test-\(UUID())")
        defer { try? FileManager.default.removeItem(at: runtime) }
        let environment = ["XDG_RUNTIME_DIR": runtime.path, "SPEAKD_SOCKET": "", "SPEAKD_HTTP": ""]
        return try await BuiltProduct.run("speak", arguments, environment: environment, standardInput: standardInput)
    }

    /// `speak --help` shows the flags of the default command, not only the list of subcommands.
    @Test(arguments: [["--help"], ["-h"], ["help"], ["--socket", "/tmp/s.sock", "--help"]])
    func topLevelHelpShowsTheSpeechFlags(arguments: [String]) async throws {
        let result = try await Self.speak(arguments)
        #expect(result.status == 0, "\(result.standardError)")
        let help = result.standardOutput
        for flag in [
            "--pitch", "--lang", "--punctuation", "--no-punctuation", "--spell-out", "--rate", "--volume",
            "--priority", "--interrupt", "--wait", "--expires-after", "--output", "--json", "--ssml", "--local",
            "--audio", "--socket", "--http", "--token-file", "<text>",
        ] {
            #expect(help.contains(flag), "\(arguments): help lacks \(flag):\n\(help)")
        }
        for subcommand in ["say", "voices", "events", "cancel", "status"] {
            #expect(help.contains("\n  \(subcommand) "), "\(arguments): help lacks \(subcommand):\n\(help)")
        }
        #expect(help.contains("speak say status"), "\(arguments): help does not say how to speak a subcommand's name")
    }

    /// What the libraries under espeak-ng print in the sandboxed worker (libpulse refused its
    /// shared memory, its directory and its socket) is not shown to the user; the file is written.
    @Test func workerLibraryNoiseStaysInTheDebugLog() async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).wav")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try await Self.speak(["--output", output.path, "Platform four"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.isEmpty, "\(result.standardError)")
        let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
        #expect(size > 44 + 22_050, "\(size) bytes")
    }

    /// The help of a subcommand is still its own.
    @Test func subcommandHelpIsItsOwn() async throws {
        let result = try await Self.speak(["cancel", "--help"])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("--all"))
        #expect(!result.standardOutput.contains("--pitch"))
    }

    /// Text from standard input loses the newline `echo` and editors put at its end.
    @Test func standardInputLosesItsTrailingNewline() async throws {
        let result = try await Self.speak(
            ["--audio", "null", "--wait"], standardInput: Data("Doors closing \n\n".utf8))
        #expect(result.status == 0, "\(result.standardError)")
        let finished = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        #expect(finished?["text"] as? String == "Doors closing", "\(result.standardOutput)")
    }

    /// libasound's own error lines ("ALSA lib pcm.c:…") do not reach the user; speak's error names the device.
    @Test func alsaErrorsAreSpeaksOwn() async throws {
        let result = try await Self.speak(["--audio", "alsa:speakd-test-no-such-pcm", "--wait", "hello"])
        #expect(result.status == 1, "\(result.standardError)")
        #expect(result.standardError.contains("alsa:speakd-test-no-such-pcm"), "\(result.standardError)")
        #expect(!result.standardError.contains("ALSA lib"), "\(result.standardError)")
    }
}
