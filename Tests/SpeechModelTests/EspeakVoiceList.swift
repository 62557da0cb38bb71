import Foundation

@testable import SpeechModel

/// The voices of the installed espeak-ng, read from `espeak-ng --voices` the way a renderer
/// reports them: the voice's language first, then its other languages.
enum EspeakVoiceList {
    static func installed() throws -> [VoiceInfo] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/espeak-ng")
        process.arguments = ["--voices"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return parse(String(decoding: data, as: UTF8.self))
    }

    /// Parses lines like ` 5  es-419  --/M  Spanish_(Latin_America) roa/es-419  (es-mx 6)(es 6)`.
    static func parse(_ listing: String) -> [VoiceInfo] {
        listing.split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard fields.count >= 5 else { return nil }
            var languages = [fields[1]]
            for other in fields.dropFirst(5).joined().split(separator: ")") {
                let tag = other.drop { $0 == "(" }.prefix { !$0.isNumber }
                if !tag.isEmpty { languages.append(String(tag)) }
            }
            return VoiceInfo(identifier: fields[4], name: fields[3], languages: languages)
        }
    }

    /// The repository's `Voices/overrides`.
    static var overridesFile: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Voices/overrides")
    }
}
