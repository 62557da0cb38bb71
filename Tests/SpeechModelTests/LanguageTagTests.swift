import Foundation
import Testing

@testable import SpeechModel

@Suite struct LanguageTagTests {
    @Test(arguments: [
        ("en", "en"),
        ("EN-latn-gb", "en-Latn-GB"),
        ("pt-pt", "pt-PT"),
        ("es-419", "es-419"),
        ("zh-hant-hk", "zh-Hant-HK"),
        ("sr-LATN", "sr-Latn"),
        ("de-CH-1901", "de-CH-1901"),
        ("sl-rozaj-biske", "sl-rozaj-biske"),
        ("hy-Latn-IT-arevela", "hy-Latn-IT-arevela"),
        ("de-DE-u-co-phonebk", "de-DE-u-co-phonebk"),
        ("en-US-x-twain", "en-US-x-twain"),
        ("en-gb-x-RP", "en-GB-x-rp"),
        ("x-whatever", "x-whatever"),
        ("qaa-Qaaa-QM-x-southern", "qaa-Qaaa-QM-x-southern"),
        ("en-b-ccc-a-bbb", "en-a-bbb-b-ccc"),
        ("abcd", "abcd"),
        ("abcdefgh-US", "abcdefgh-US"),
        ("chr-Qaaa-US-x-west", "chr-Qaaa-US-x-west"),
    ])
    func canonicalCasing(input: String, canonical: String) throws {
        #expect(try LanguageTag(input).canonical == canonical)
        #expect(try LanguageTag(input).description == canonical)
    }

    @Test func partsOfAFullTag() throws {
        let tag = try LanguageTag("ZH-yue-hant-HK-1994-fonipa-u-ca-chinese-T-en-x-kiosk-v2")
        // A single registered extlang becomes the language.
        #expect(tag.language == "yue")
        #expect(tag.extlangs.isEmpty)
        #expect(tag.script == "Hant")
        #expect(tag.region == "HK")
        #expect(tag.variants == ["1994", "fonipa"])
        #expect(tag.extensions.map(\.description) == ["t-en", "u-ca-chinese"])
        #expect(tag.extensions.first?.singleton == "t")
        #expect(tag.extensions.last?.subtags == ["ca", "chinese"])
        #expect(tag.privateUse == ["kiosk", "v2"])
        #expect(tag.canonical == "yue-Hant-HK-1994-fonipa-t-en-u-ca-chinese-x-kiosk-v2")
    }

    @Test func unregisteredExtlangsAreKept() throws {
        let tag = try LanguageTag("zh-abc-def-ghi")
        #expect(tag.language == "zh")
        #expect(tag.extlangs == ["abc", "def", "ghi"])
        #expect(tag.canonical == "zh-abc-def-ghi")
    }

    @Test(arguments: [
        ("zh-yue", "yue"), ("zh-cmn-Hans-CN", "cmn-Hans-CN"), ("ar-arz", "arz"), ("sgn-ase", "ase"),
        ("ms-zsm", "zsm"), ("iw", "he"), ("IW-IL", "he-IL"), ("in", "id"), ("ji", "yi"), ("jw", "jv"),
        ("mo", "ro"), ("tl", "tl"), ("de-DD", "de-DE"), ("my-BU", "my-MM"),
    ])
    func legacyCodesAreMapped(input: String, canonical: String) throws {
        #expect(try LanguageTag(input).canonical == canonical)
    }

    @Test(arguments: [
        ("i-klingon", "tlh"), ("I-KLINGON", "tlh"), ("en-GB-oed", "en-GB-oxendict"), ("zh-min-nan", "nan"),
        ("art-lojban", "jbo"), ("no-bok", "nb"), ("no-nyn", "nn"), ("zh-guoyu", "cmn"), ("zh-hakka", "hak"),
        ("zh-xiang", "hsn"), ("i-lux", "lb"), ("i-navajo", "nv"), ("sgn-BE-FR", "sfb"), ("sgn-CH-DE", "sgg"),
    ])
    func grandfatheredTagsMapToPreferredValues(input: String, canonical: String) throws {
        let tag = try LanguageTag(input)
        #expect(tag.canonical == canonical)
        #expect(!tag.isGrandfathered)
    }

    @Test(arguments: ["i-default", "i-enochian", "i-mingo", "cel-gaulish", "zh-min"])
    func grandfatheredTagsWithoutPreferredValue(input: String) throws {
        let tag = try LanguageTag(input.uppercased())
        #expect(tag.canonical == input)
        #expect(tag.isGrandfathered)
        #expect(tag.language == input)
        #expect(tag.lookupCandidates.first == input)
    }

    @Test func privateUseTag() throws {
        let tag = try LanguageTag("X-Kiosk-Lobby")
        #expect(tag.language == "")
        #expect(tag.privateUse == ["kiosk", "lobby"])
        #expect(tag.canonical == "x-kiosk-lobby")
        #expect(tag.lookupCandidates == ["x-kiosk-lobby", "x-kiosk"])
    }

    @Test(arguments: [
        ("", "the tag is empty"),
        ("en-", "empty subtag at position 2"),
        ("-en", "empty subtag at position 1"),
        ("en--US", "empty subtag at position 2"),
        ("en_US", "invalid character '_' at position 3 (subtags are separated by '-')"),
        ("en US", "invalid character ' ' at position 3"),
        ("pt-BRé", "invalid character 'é' at position 6"),
        ("e", "language subtag 'e' must be 2–8 letters"),
        ("e1", "language subtag 'e1' must be 2–8 letters"),
        ("a-DE", "a tag cannot start with the singleton 'a'"),
        ("i-foo", "a tag cannot start with the singleton 'i'"),
        ("abcdefghi", "subtag 'abcdefghi' at position 1 is longer than 8 characters"),
        ("en-abcdefghi", "subtag 'abcdefghi' at position 2 is longer than 8 characters"),
        ("zh-abc-def-ghi-jkl", "more than 3 extlang subtags ('jkl' at position 5)"),
        ("abcd-efg", "extlang 'efg' at position 2 may only follow a 2–3 letter language"),
        ("de-1901-1901", "duplicate variant '1901' at position 3"),
        ("de-DE-1901-1901", "duplicate variant '1901' at position 4"),
        ("sl-Rozaj-rozaj", "duplicate variant 'rozaj' at position 3"),
        ("en-u-ca-u-nu", "duplicate extension singleton 'u' at position 4"),
        ("en-a", "extension 'a' at position 2 needs at least one subtag of 2–8 characters"),
        ("en-a-b-cc", "extension 'a' at position 2 needs at least one subtag of 2–8 characters"),
        ("en-x", "private use 'x' at position 2 needs at least one subtag"),
        ("x", "private use 'x' at position 1 needs at least one subtag"),
        ("en-US-GB", "subtag 'gb' at position 3 is not valid here"),
        ("en-Latn-Latn", "subtag 'latn' at position 3 is not valid here"),
        ("en-12", "subtag '12' at position 2 is not valid here"),
        ("en-1234-12", "subtag '12' at position 3 is not valid here"),
        // espeak-ng's own tags for two voices: script after region, a 3-letter variant.
        ("chr-US-Qaaa-x-west", "subtag 'qaaa' at position 3 is not valid here"),
        ("en-us-nyc", "subtag 'nyc' at position 3 is not valid here"),
    ])
    func malformedTagsNameTheTagAndTheProblem(input: String, reason: String) {
        let error = #expect(throws: SpeechInputError.self) { try LanguageTag(input) }
        #expect(error?.field == "language")
        #expect(error?.kind == "malformed")
        #expect(error?.message == "'\(input)' is not a well-formed BCP 47 tag: \(reason)")
    }

    @Test func fieldCanBeNamed() {
        let error = #expect(throws: SpeechInputError.self) { try LanguageTag("en-", field: "spans[1].language") }
        #expect(error?.field == "spans[1].language")
        #expect(
            error?.description == "spans[1].language: 'en-' is not a well-formed BCP 47 tag: empty subtag at position 2"
        )
    }

    @Test(arguments: [
        ("zh-Hant-HK-x-foo", ["zh-Hant-HK-x-foo", "zh-Hant-HK", "zh-Hant", "zh"]),
        (
            "zh-Hant-CN-x-private1-private2",
            ["zh-Hant-CN-x-private1-private2", "zh-Hant-CN-x-private1", "zh-Hant-CN", "zh-Hant", "zh"]
        ),
        ("de-DE-u-co-phonebk", ["de-DE-u-co-phonebk", "de-DE-u-co", "de-DE", "de"]),
        ("en-a-bb-b-cc", ["en-a-bb-b-cc", "en-a-bb", "en"]),
        ("en-GB-x-rp", ["en-GB-x-rp", "en-GB", "en"]),
        ("en-x-a-bc-d", ["en-x-a-bc-d", "en-x-a-bc", "en"]),
        ("es-419", ["es-419", "es"]),
        ("en", ["en"]),
        ("sl-rozaj-biske", ["sl-rozaj-biske", "sl-rozaj", "sl"]),
    ])
    func lookupCandidatesTruncateFromTheEnd(input: String, candidates: [String]) throws {
        #expect(try LanguageTag(input).lookupCandidates == candidates)
    }

    @Test func equalityIsCaseInsensitiveThroughCanonicalForm() throws {
        #expect(try LanguageTag("EN-us") == LanguageTag("en-US"))
        #expect(try LanguageTag("iw") == LanguageTag("he"))
        #expect(try LanguageTag("en-US") != LanguageTag("en-GB"))
    }

    @Test func codableAsAString() throws {
        let tag = try LanguageTag("pt-pt")
        let data = try JSONEncoder().encode([tag])
        #expect(String(decoding: data, as: UTF8.self) == #"["pt-PT"]"#)
        #expect(try JSONDecoder().decode([LanguageTag].self, from: data) == [tag])
        let error = #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([LanguageTag].self, from: Data(#"["en_GB"]"#.utf8))
        }
        guard case .dataCorrupted(let context) = error else {
            Issue.record("expected dataCorrupted, got \(String(describing: error))")
            return
        }
        #expect(context.debugDescription.contains("'en_GB' is not a well-formed BCP 47 tag"))
    }
}
