import EspeakEngine
import FuzzSupport
import SpeechModel

/// A span's `ipa` as `IPATranscriber` turns it into espeak-ng phoneme mnemonics. Pure Swift:
/// libespeak-ng is linked but never initialised or called.
///
/// Checks: a refusal names the field `ipa`; an accepted transcription is non-empty and made of
/// the mnemonics' printable ASCII only, so it cannot end the `[[…]]` it is placed in or open
/// markup (`<`, `&`) in the SSML document around it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIPA(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let ipa = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let phonemes: String
    do {
        phonemes = try IPATranscriber.espeakPhonemes(ipa)
    } catch {
        FuzzChecks.requireClear(error, field: ["ipa"], input: ipa)
        return 0
    }
    FuzzChecks.require(!phonemes.isEmpty, "\(ipa.debugDescription) transcribes to nothing")
    let forbidden: Set<Unicode.Scalar> = ["[", "]", "<", ">", "&", "\"", "\\"]
    FuzzChecks.require(
        phonemes.unicodeScalars.allSatisfy {
            $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F && !forbidden.contains($0)
        },
        "\(ipa.debugDescription) transcribes to \(phonemes.debugDescription), which is not plain phoneme mnemonics")
    return 0
}
