import FoundationEssentials
import SpeechModel

/// A Piper voice: its model, its configuration and what the configuration says about it.
public struct PiperVoice: Sendable, Hashable {
    /// The model's file name without `.onnx` (`en_US-joe-medium`): the name requests give.
    public var name: String
    public var model: String
    public var configuration: String
    /// BCP 47 tags it speaks (`en-US`).
    public var languages: [String]
    public var sampleRate: Int
    public var quality: String?

    /// As the voice list shows it.
    public var info: VoiceInfo {
        VoiceInfo(
            identifier: "piper:\(name)", name: name, languages: languages, engine: PiperRenderer.engine,
            sampleRate: sampleRate, quality: quality)
    }

    /// Whether it speaks `tag`: the same language, and the same region when both name one.
    public func speaks(_ tag: LanguageTag) -> Bool {
        let asked = tag.canonical.lowercased().split(separator: "-")
        return languages.contains { served in
            let voice = served.lowercased().split(separator: "-")
            return zip(asked, voice).allSatisfy { $0 == $1 }
        }
    }

    private struct Configuration: Decodable {
        struct Audio: Decodable {
            var sample_rate: Int
            var quality: String?
        }
        struct Language: Decodable {
            var code: String
        }
        var audio: Audio
        var language: Language?
        var espeak: [String: String]?
    }

    /// Every voice in `directory` (each `NAME.onnx` beside its `NAME.onnx.json`), checked: a file
    /// that cannot be read or a configuration that is not well formed is an error naming the file.
    public static func load(directory: String) throws(PiperVoiceError) -> [PiperVoice] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".onnx") }
                .sorted()
        } catch {
            throw PiperVoiceError(file: directory, problem: "cannot list the directory")
        }
        guard !names.isEmpty else { throw PiperVoiceError(file: directory, problem: "holds no .onnx voice") }
        var voices: [PiperVoice] = []
        for file in names {
            let model = "\(directory)/\(file)"
            let configurationPath = "\(model).json"
            guard FileManager.default.isReadableFile(atPath: model) else {
                throw PiperVoiceError(file: model, problem: "cannot be read")
            }
            guard let data = FileManager.default.contents(atPath: configurationPath) else {
                throw PiperVoiceError(file: configurationPath, problem: "cannot be read")
            }
            let configuration: Configuration
            do {
                configuration = try JSONDecoder().decode(Configuration.self, from: data)
            } catch {
                throw PiperVoiceError(file: configurationPath, problem: "is not a Piper voice configuration (\(error))")
            }
            guard (8000...96000).contains(configuration.audio.sample_rate) else {
                throw PiperVoiceError(
                    file: configurationPath, problem: "has sample rate \(configuration.audio.sample_rate) Hz")
            }
            let code = configuration.language?.code ?? configuration.espeak?["voice"] ?? ""
            guard let tag = try? LanguageTag(String(code.map { $0 == "_" ? "-" : $0 })) else {
                throw PiperVoiceError(file: configurationPath, problem: "names no language ('\(code)')")
            }
            voices.append(
                PiperVoice(
                    name: String(file.dropLast(".onnx".count)), model: model, configuration: configurationPath,
                    languages: [tag.canonical], sampleRate: configuration.audio.sample_rate,
                    quality: configuration.audio.quality))
        }
        return voices
    }
}

/// A voice file that cannot be used, found at start.
public struct PiperVoiceError: Error, Sendable, CustomStringConvertible {
    public var file: String
    public var problem: String
    public var description: String { "Piper voice '\(file)' \(problem)" }
}
