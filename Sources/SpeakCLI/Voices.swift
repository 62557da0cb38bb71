import ArgumentParser
import EspeakEngine
import Foundation
import SpeechModel

extension Speak {
    /// `speak voices [--lang TAG]`.
    struct Voices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the voices and the BCP 47 tags each serves, or show the voice a tag resolves to.",
            discussion: """
                Lists the voices of the espeak-ng installed on this machine, with the overrides of \
                the voices directory ($SPEAKD_VOICES, /usr/local/share/speakd/voices, \
                /usr/share/speakd/voices, or the source tree's Voices/).
                """)

        @Option(name: .customLong("lang"), help: "Show only the voice this BCP 47 tag resolves to.")
        var language: String?

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
            // The engine's list is the one `GET /v1/voices` serves: the tags after the overrides.
            for voice in try await engine.voices() {
                let identifier = voice.identifier.padding(toLength: 24, withPad: " ", startingAt: 0)
                print("\(identifier) \(voice.languages.joined(separator: " "))")
            }
        }
    }
}
