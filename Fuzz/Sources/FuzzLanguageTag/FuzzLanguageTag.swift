import FuzzSupport
import SpeechModel

/// A BCP 47 tag as `LanguageTag(_:)` parses a `language` field or an `xml:lang` attribute.
///
/// Checks: a refusal names the field `language`; an accepted tag's canonical form parses to the
/// same tag (canonicalisation is idempotent), and its lookup candidates end with its language.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLanguageTag(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let string = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let tag: LanguageTag
    do {
        tag = try LanguageTag(string)
    } catch {
        FuzzChecks.requireClear(error, field: ["language"], input: string)
        return 0
    }
    let again: LanguageTag
    do {
        again = try LanguageTag(tag.canonical)
    } catch {
        fatalError(
            "fuzz property violated: the canonical form \(tag.canonical) of \(string.debugDescription) is refused: \(error)"
        )
    }
    FuzzChecks.require(again == tag, "\(string.debugDescription) → \(tag.canonical) reparses differently: \(again)")
    let candidates = tag.lookupCandidates
    FuzzChecks.require(
        candidates.first == tag.canonical && !candidates.contains(where: \.isEmpty),
        "lookup candidates \(candidates) of \(tag.canonical)")
    return 0
}
