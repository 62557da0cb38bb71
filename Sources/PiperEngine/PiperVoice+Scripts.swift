import SpeechModel

extension PiperVoice {
    /// A writing system, as far as a Piper voice's phonemiser tells them apart.
    enum Script: String, Sendable {
        case latin = "Latin"
        case greek = "Greek"
        case cyrillic = "Cyrillic"
        case hebrew = "Hebrew"
        case arabic = "Arabic"
        case devanagari = "Devanagari"
        case georgian = "Georgian"
        case han = "Han"
        case other = "in a script it has no rules for"
        case emoji = "emoji"

        /// The script of a letter or emoji; nil for what every voice reads or skips as its own
        /// (digits, punctuation, spaces, marks, symbols).
        init?(_ scalar: Unicode.Scalar) {
            let value = scalar.value
            let properties = scalar.properties
            if properties.isEmojiPresentation || (properties.isEmoji && value >= 0x1F000) {
                self = .emoji
                return
            }
            guard properties.isAlphabetic, properties.generalCategory != .nonspacingMark else { return nil }
            switch value {
            case 0x41...0x5A, 0x61...0x7A, 0xAA, 0xBA, 0xC0...0x2AF, 0x1D00...0x1DBF, 0x1E00...0x1EFF, 0x2C60...0x2C7F,
                0xA720...0xA7FF, 0xAB30...0xAB6F, 0xFB00...0xFB06, 0xFF21...0xFF3A, 0xFF41...0xFF5A:
                self = .latin
            case 0x370...0x3FF, 0x1F00...0x1FFF: self = .greek
            case 0x400...0x52F, 0x1C80...0x1C8F, 0x2DE0...0x2DFF, 0xA640...0xA69F: self = .cyrillic
            case 0x590...0x5FF, 0xFB1D...0xFB4F: self = .hebrew
            case 0x600...0x6FF, 0x750...0x77F, 0x8A0...0x8FF, 0xFB50...0xFDFF, 0xFE70...0xFEFF: self = .arabic
            case 0x900...0x97F: self = .devanagari
            case 0x10A0...0x10FF, 0x1C90...0x1CBF: self = .georgian
            case 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xF900...0xFAFF, 0x20000...0x3FFFF: self = .han
            default: self = .other
            }
        }
    }

    /// The scripts the voice's phonemiser reads as words: Latin, and its language's own.
    ///
    /// Any other letter is spelt out by the phonemiser as "Cyrillic letter …" (3,000 such
    /// characters made 17 minutes of audio and 1.4 GB in the worker), and an emoji is said not
    /// at all (1,000 of them made a silent render): both are refused rather than spoken so.
    var scripts: Set<Script> {
        let language = languages.first?.split(separator: "-").first.map { $0.lowercased() } ?? ""
        let own: Script? =
            switch language {
            case "ru", "uk", "kk", "sr", "bg", "mk", "be": .cyrillic
            case "el": .greek
            case "he": .hebrew
            case "ar", "fa", "ur": .arabic
            case "hi", "ne", "mr": .devanagari
            case "ka": .georgian
            case "zh": .han
            default: nil
            }
        return Set([.latin] + (own.map { [$0] } ?? []))
    }

    /// The first run of characters in `text` the voice cannot speak: its offsets in characters
    /// (from 0) and its script; nil when it speaks all of it.
    func unspeakable(_ text: String) -> (range: Range<Int>, script: Script)? {
        let scripts = scripts
        var found: (range: Range<Int>, script: Script)?
        var offset = 0
        for character in text {
            // A run goes on through characters of no script (spaces, punctuation) and of its own.
            let script = character.unicodeScalars.lazy.compactMap(Script.init).first
            if let run = found {
                if let script {
                    guard script == run.script else { return run }
                    found?.range = run.range.lowerBound..<(offset + 1)
                }
            } else if let script, !scripts.contains(script) {
                found = (offset..<(offset + 1), script)
            }
            offset += 1
        }
        return found
    }
}
