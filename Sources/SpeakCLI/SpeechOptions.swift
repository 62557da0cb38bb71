import ArgumentParser
import SpeechModel

/// The speech attributes a command line sets for a whole utterance.
///
/// The numeric options parse the next word unconditionally, so `--pitch -1` is the value -1
/// (refused by name as out of range) rather than a missing value followed by an option `-1`.
struct SpeechOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Pitch as an F0 multiplier, 0.0–2.0 (1.0 normal).")
    var pitch: Double?

    @Option(name: .customLong("lang"), help: "BCP 47 language tag, e.g. en-GB, pt-PT, es-419.")
    var language: String?

    @Option(help: "A voice by name, as the daemon's voice list shows it (a Piper voice, e.g. en_US-joe-medium).")
    var voice: String?

    @Flag(inversion: .prefixedNo, help: "Speak every punctuation mark, or none (default: the configured default).")
    var punctuation: Bool?

    @Flag(help: "Spell out each character (\"07402\" → \"zero seven four zero two\").")
    var spellOut = false

    @Option(parsing: .unconditional, help: "Speaking rate, 0.5–2.0 (× 175 words per minute).")
    var rate: Double?

    @Option(parsing: .unconditional, help: "Volume, 0.0–2.0 (above 1.0 raised after the engine, under a limiter).")
    var volume: Double?

    /// The utterance defaults these options describe; errors name the flag and its value.
    func attributes() throws -> SpeechAttributes {
        var attributes = SpeechAttributes(
            pitch: pitch, rate: rate, volume: volume, punctuation: punctuation,
            spellOut: spellOut ? true : nil, voice: voice)
        if let voice, !voice.contains(where: { !$0.isWhitespace }) {
            throw ValidationError("--voice: must not be empty")
        }
        if let language {
            do {
                attributes.language = try LanguageTag(language)
            } catch {
                throw ValidationError("--lang \(language): \(error.message)")
            }
        }
        do {
            try attributes.validate()
        } catch {
            let flag = error.field.map { "--\($0)" } ?? "option"
            let value =
                [("pitch", pitch), ("rate", rate), ("volume", volume)]
                .first { "--\($0.0)" == flag }?.1.map { " \(Self.format($0))" } ?? ""
            throw ValidationError("\(flag)\(value): \(error.message)")
        }
        return attributes
    }

    func validate() throws {
        _ = try attributes()
    }

    private static func format(_ value: Double) -> String {
        value.rounded() == value ? String(Int(value)) : String(value)
    }
}
