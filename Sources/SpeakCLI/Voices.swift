import ArgumentParser
import EspeakEngine
import Foundation
import SpeakAPI
import SpeechModel

extension Speak {
    /// `speak voices [--lang TAG]`.
    struct Voices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the voices and the BCP 47 tags each serves, or show the voice a tag resolves to.",
            discussion: """
                Lists the voices the daemon speaks with (GET /v1/voices: espeak-ng's and, with \
                --piper, Piper's), one line each: name, engine, BCP 47 tags, sample rate and \
                quality where known. With --local, or when no daemon answers, lists the voices \
                of the espeak-ng installed on this machine, with the overrides of the voices \
                directory ($SPEAKD_VOICES, /usr/local/share/speakd/voices, \
                /usr/share/speakd/voices, or the source tree's Voices/). --lang shows which \
                espeak-ng voice a tag resolves to on this machine.
                """)

        @Option(name: .customLong("lang"), help: "Show only the voice this BCP 47 tag resolves to.")
        var language: String?

        @Flag(help: "List this machine's espeak-ng voices without asking the daemon.")
        var local = false

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        func validate() throws {
            if let language {
                do {
                    _ = try LanguageTag(language)
                } catch {
                    throw ValidationError("--lang \(language): \(error.message)")
                }
            }
        }

        func run() async throws {
            let engine = try await LocalSpeech.catalogEngine()
            guard let catalog = engine.voiceResolver as? VoiceCatalog else { return }
            if let language {
                let resolution: VoiceCatalog.Resolution
                do {
                    resolution = try catalog.resolve(try LanguageTag(language))
                } catch {
                    throw SpeakFailure.invalidInput("--lang \(language): \(error.message)")
                }
                let variant = resolution.voice.variant.map { " +\($0)" } ?? ""
                print(
                    "\(language) → \(resolution.voice.identifier)\(variant) (\(resolution.voice.name)), matched \(resolution.matchedTag) by \(resolution.source.rawValue)"
                )
                return
            }
            if !local, let daemon = try await connection.reachableDaemon() {
                let response = try await daemon.send("GET", "/v1/voices")
                guard response.status == 200 else {
                    throw SpeakFailure.notCompleted("GET /v1/voices: HTTP \(response.status)")
                }
                for voice in try response.decode(VoiceList.self).voices { print(Self.line(voice)) }
                return
            }
            if !local, connection.isExplicit() {
                let tried = try connection.candidates().map(\.description).joined(separator: ", ")
                throw SpeakFailure.daemonUnreachable("no speakd answers at \(tried)")
            }
            // The engine's list is the one `GET /v1/voices` serves for espeak-ng: the tags after
            // the overrides.
            for var voice in try await engine.voices() {
                voice.engine = voice.engine ?? engine.engineName
                print(Self.line(voice))
            }
        }

        /// `VOICE  ENGINE  TAGS [RATE Hz] [QUALITY]`: a voice chosen by name (`--voice`, Piper's)
        /// shows that name; espeak-ng's, chosen by language, show their identifier.
        static func line(_ voice: VoiceInfo) -> String {
            let label = voice.engine == "piper" ? voice.name : voice.identifier
            let identifier = label.padding(toLength: 24, withPad: " ", startingAt: 0)
            let engine = (voice.engine ?? "").padding(toLength: 10, withPad: " ", startingAt: 0)
            let details = [voice.sampleRate.map { "\($0) Hz" }, voice.quality].compactMap { $0 }
            return "\(identifier) \(engine) \(voice.languages.joined(separator: " "))"
                + (details.isEmpty ? "" : " (\(details.joined(separator: ", ")))")
        }
    }
}
