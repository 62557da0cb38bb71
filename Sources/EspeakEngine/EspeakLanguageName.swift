import SpeechModel

/// Converts espeak-ng's language names (`en-gb-scotland`, `es-419`, `pt-br`, `en-us-nyc`,
/// `chr-US-Qaaa-x-west`) into canonical BCP 47 tags (`en-GB-scotland`, `es-419`, `pt-BR`,
/// `en-US-x-nyc`, `chr-Qaaa-US-x-west`).
///
/// espeak-ng writes every subtag in lower case, puts scripts after regions, and uses dialect
/// names that are not registered BCP 47 variants (`nyc`); those become private-use subtags.
enum EspeakLanguageName {
    /// The canonical BCP 47 form of `name`, or nil when it cannot be made into a well-formed tag.
    static func bcp47(_ name: String) -> String? {
        var subtags = name.split(separator: "-").map { $0.lowercased() }
        // An extended language subtag (`zh-yue`) is canonically the language itself (`yue`).
        if subtags.count > 1, (2...3).contains(subtags[0].count), subtags[1].count == 3,
            subtags[1].allSatisfy({ $0.isASCII && $0.isLetter })
        {
            subtags.removeFirst()
        }
        guard let language = subtags.first else { return nil }
        var script: String?
        var region: String?
        var variants: [String] = []
        var privateUse: [String] = []
        var index = 1
        while index < subtags.count {
            let subtag = subtags[index]
            index += 1
            if subtag == "x" {
                privateUse += subtags[index...]
                break
            }
            let letters = subtag.allSatisfy { $0.isASCII && $0.isLetter }
            let digits = subtag.allSatisfy { $0.isASCII && $0.isNumber }
            if script == nil, region == nil, variants.isEmpty, subtag.count == 4, letters {
                script = subtag
            } else if region == nil, variants.isEmpty, (subtag.count == 2 && letters) || (subtag.count == 3 && digits) {
                region = subtag
            } else if script == nil, variants.isEmpty, subtag.count == 4, letters {
                // espeak-ng writes `chr-us-qaaa`: a script after the region.
                script = subtag
            } else if (5...8).contains(subtag.count) || (subtag.count == 4 && subtag.first!.isNumber) {
                variants.append(subtag)
            } else {
                privateUse.append(subtag)
            }
        }
        var parts = [language]
        if let script { parts.append(script.prefix(1).uppercased() + script.dropFirst()) }
        if let region { parts.append(region.uppercased()) }
        parts += variants
        // Private-use subtags keep espeak-ng's lower case.
        if !privateUse.isEmpty { parts += ["x"] + privateUse }
        let tag = parts.joined(separator: "-")
        guard (try? LanguageTag(tag)) != nil else { return nil }
        return tag
    }
}
