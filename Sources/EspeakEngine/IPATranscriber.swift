import SpeechModel
// Canonical decomposition from the standard library's Unicode tables, as swift-foundation
// itself uses them: Foundation's `decomposedStringWithCanonicalMapping` would load ICU.
@_spi(_Unicode) import Swift

#if canImport(Glibc)
import Glibc
#endif

/// Converts IPA to espeak-ng's phoneme mnemonics, for `[[…]]` phoneme input.
///
/// The table covers the IPA that English and Portuguese transcriptions commonly use, with
/// espeak-ng's names for those phonemes (`docs/phonemes.md` in espeak-ng: `@` for ə, `3:` for ɜː,
/// `6` for ɐ, `~` for nasalisation). Stress marks become `'` (primary) and `,` (secondary), the
/// length mark becomes `:`. Delimiters (`/`, `[`, `]`), syllable dots and tie bars carry no sound
/// and are dropped; spaces separate words. Sequences are matched longest first, so the diphthongs
/// and affricates (`eɪ`, `oʊ`, `tʃ`) map to single espeak phonemes. Anything else is rejected:
/// an unknown symbol must not be silently mispronounced.
public enum IPATranscriber {
    /// IPA (one or more characters) → espeak-ng phoneme mnemonic.
    static let table: [String: String] = [
        // Diphthongs and long vowels with a single espeak phoneme.
        "eɪ": "eI", "aɪ": "aI", "ɔɪ": "OI", "aʊ": "aU", "oʊ": "oU", "əʊ": "@U", "ɪə": "i@",
        "eə": "e@", "ɛə": "e@", "ʊə": "U@", "ɜː": "3:", "ɝ": "3:", "ɚ": "3", "iː": "i:", "uː": "u:",
        "ɑː": "A:", "ɔː": "O:", "aː": "a:",
        // Vowels.
        "i": "i", "ɪ": "I", "e": "e", "ɛ": "E", "æ": "a", "a": "a", "ɐ": "6", "ɑ": "A", "ɒ": "0",
        "ɔ": "O", "o": "o", "ʊ": "U", "u": "u", "ʌ": "V", "ə": "@", "ɜ": "3", "ɨ": "y", "ɯ": "u",
        "y": "y", "ø": "Y", "œ": "W", "ɵ": "@", "ɘ": "@", "ɤ": "o",
        // Plosives, affricates.
        "p": "p", "b": "b", "t": "t", "d": "d", "k": "k", "g": "g", "ɡ": "g", "ʔ": "?",
        "tʃ": "tS", "t͡ʃ": "tS", "dʒ": "dZ", "d͡ʒ": "dZ", "ts": "ts", "dz": "dz",
        // Fricatives.
        "f": "f", "v": "v", "θ": "T", "ð": "D", "s": "s", "z": "z", "ʃ": "S", "ʒ": "Z", "h": "h",
        "x": "x", "ç": "C", "ɣ": "Q", "β": "B", "χ": "X", "ʁ": "R",
        // Nasals, liquids, approximants.
        "m": "m", "n": "n", "ŋ": "N", "ɲ": "J", "l": "l", "ɫ": "l", "ʎ": "L", "r": "r", "ɾ": "r",
        "ɹ": "r", "ʀ": "R", "w": "w", "j": "j", "ɥ": "j",
        // Suprasegmentals and diacritics.
        "ˈ": "'", "ˌ": ",", "ː": ":", "ˑ": "", "\u{0303}": "~", "\u{0329}": "", "\u{032F}": "",
        "\u{02B0}": "", ".": "", "\u{0361}": "", "\u{035C}": "", "/": "", "[": "", "]": "",
        " ": " ",
    ]

    private static let longestKey = table.keys.map(\.unicodeScalars.count).max() ?? 1

    /// The espeak-ng phonemes for `ipa`.
    ///
    /// Throws `SpeechInputError.unsupported(field: "ipa", …)` naming the first symbol the table
    /// does not cover.
    public static func espeakPhonemes(_ ipa: String) throws(SpeechInputError) -> String {
        // Work on scalars: combining marks (tilde, tie bar) are table entries of their own.
        // Decomposed first, so `ã` is `a` + combining tilde whichever way the caller wrote it.
        let scalars = Array(ipa._nfd)
        var output = ""
        var index = 0
        while index < scalars.count {
            var matched = false
            for length in stride(from: min(longestKey, scalars.count - index), through: 1, by: -1) {
                var key = String.UnicodeScalarView()
                key.append(contentsOf: scalars[index..<(index + length)])
                if let phoneme = table[String(key)] {
                    output += phoneme
                    index += length
                    matched = true
                    break
                }
            }
            guard matched else {
                let scalar = scalars[index]
                let hex = String(scalar.value, radix: 16, uppercase: true)
                throw .unsupported(
                    field: "ipa",
                    "unsupported IPA symbol '\(scalar)' (U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex)) in '\(ipa)'"
                )
            }
        }
        let words = output.split(separator: " ")
        // Stress and length marks alone are no pronunciation.
        guard words.contains(where: { $0.contains { !"',:~".contains($0) } }) else {
            throw .malformed(field: "ipa", "'\(ipa)' contains no phonemes")
        }
        return words.joined(separator: " ")
    }
}
