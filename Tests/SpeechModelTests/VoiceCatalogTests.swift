import Foundation
import Testing

@testable import SpeechModel

@Suite struct VoiceCatalogTests {
    /// A small voice list shaped like espeak-ng's.
    static let voices = [
        VoiceInfo(identifier: "gmw/en", name: "English_(Great_Britain)", languages: ["en-gb", "en"]),
        VoiceInfo(identifier: "gmw/en-US", name: "English_(America)", languages: ["en-us", "en"]),
        VoiceInfo(identifier: "gmw/en-GB-x-rp", name: "English_(RP)", languages: ["en-gb-x-rp", "en-gb", "en"]),
        VoiceInfo(identifier: "roa/pt", name: "Portuguese_(Portugal)", languages: ["pt", "pt-pt"]),
        VoiceInfo(identifier: "roa/pt-BR", name: "Portuguese_(Brazil)", languages: ["pt-br", "pt"]),
        VoiceInfo(identifier: "roa/es", name: "Spanish_(Spain)", languages: ["es"]),
        VoiceInfo(identifier: "roa/es-419", name: "Spanish_(Latin_America)", languages: ["es-419", "es-mx", "es"]),
        VoiceInfo(identifier: "gmw/de", name: "German", languages: ["de"]),
    ]

    static func tag(_ string: String) -> LanguageTag {
        // Test literals are well-formed; a failure is a parser bug the tag tests report.
        try! LanguageTag(string)
    }

    @Test(arguments: [
        ("pt", "roa/pt"),  // the voice whose first tag is `pt` beats one listing it second
        ("PT-pt", "roa/pt"),
        ("pt-BR", "roa/pt-BR"),
        ("pt-AO", "roa/pt"),
        ("en-GB-x-rp", "gmw/en-GB-x-rp"),
        ("en-GB-x-foo", "gmw/en"),
        ("en-US-u-co-phonebk", "gmw/en-US"),
        ("en", "gmw/en"),  // first in renderer order among voices that list `en` second
        ("es-MX", "roa/es-419"),
        ("es-AR", "roa/es"),
        ("de-CH-1901", "gmw/de"),
    ])
    func voicesAloneUseLookup(request: String, voice: String) throws {
        let catalog = VoiceCatalog(voices: Self.voices)
        #expect(try catalog.voice(for: Self.tag(request)).identifier == voice)
    }

    @Test func overridesComeFirstAtEachCandidate() throws {
        let overrides = try VoiceOverrides(
            parsing: """
                en     gmw/en-US
                es-AR  roa/es-419  +speakd-kiosk
                pt     roa/pt-BR
                """)
        let catalog = VoiceCatalog(voices: Self.voices, overrides: overrides)
        #expect(try catalog.voice(for: Self.tag("en")).identifier == "gmw/en-US")
        // A more specific voice tag still beats a less specific override.
        #expect(try catalog.voice(for: Self.tag("en-GB")).identifier == "gmw/en")
        #expect(try catalog.voice(for: Self.tag("en-AU")).identifier == "gmw/en-US")
        #expect(try catalog.voice(for: Self.tag("pt-PT")).identifier == "roa/pt")
        #expect(try catalog.voice(for: Self.tag("pt")).identifier == "roa/pt-BR")

        let resolution = try catalog.resolve(Self.tag("es-AR-x-lobby"))
        #expect(resolution.voice.identifier == "roa/es-419")
        #expect(resolution.voice.variant == "speakd-kiosk")
        #expect(resolution.matchedTag == "es-AR")
        #expect(resolution.source == .override)
        #expect(
            try catalog.resolve(Self.tag("de-AT"))
                == VoiceCatalog.Resolution(
                    voice: Self.voices[7], matchedTag: "de", source: .voice))
    }

    @Test func overridesNamingMissingVoicesAreSkippedAndReported() throws {
        let overrides = try VoiceOverrides(parsing: "de  gmw/de-XX\nen gmw/en-US\n")
        let catalog = VoiceCatalog(voices: Self.voices, overrides: overrides)
        #expect(try catalog.voice(for: Self.tag("de")).identifier == "gmw/de")
        #expect(catalog.danglingOverrides.map(\.voice) == ["gmw/de-XX"])
        #expect(catalog.danglingOverrides.first?.line == 1)
    }

    @Test func unknownTagIsNotFoundNamingTheTag() {
        let catalog = VoiceCatalog(voices: Self.voices)
        let error = #expect(throws: SpeechInputError.self) { try catalog.voice(for: Self.tag("xx-YY")) }
        #expect(error?.kind == "notFound")
        #expect(error?.field == "language")
        #expect(error?.message == "no voice for 'xx-YY'")
    }

    @Test func fallbackIsUsedOnlyWhenNothingMatches() throws {
        let catalog = VoiceCatalog(voices: Self.voices, fallback: Self.tag("de"))
        let resolution = try catalog.resolve(Self.tag("xx-YY"))
        #expect(resolution.voice.identifier == "gmw/de")
        #expect(resolution.source == .fallback)
        #expect(try catalog.voice(for: Self.tag("pt")).identifier == "roa/pt")

        let broken = VoiceCatalog(voices: Self.voices, fallback: Self.tag("tlh"))
        let error = #expect(throws: SpeechInputError.self) { try broken.voice(for: Self.tag("xx")) }
        #expect(error?.message == "no voice for 'xx', nor for the fallback 'tlh'")
    }

    @Test func nilTagMeansTheDefaultLanguage() throws {
        #expect(try VoiceCatalog(voices: Self.voices).voice(for: nil).identifier == "gmw/en-US")
        #expect(VoiceCatalog(voices: Self.voices).defaultLanguage == Self.tag("en-US"))
        let german = VoiceCatalog(voices: Self.voices, defaultLanguage: Self.tag("de-AT"))
        #expect(try german.voice(for: nil).identifier == "gmw/de")
        let error = #expect(throws: SpeechInputError.self) {
            try VoiceCatalog(voices: [], defaultLanguage: Self.tag("fr")).voice(for: nil)
        }
        #expect(error?.message == "no voice for 'fr'")
    }

    @Test func servedVoicesReflectOverrides() throws {
        let overrides = try VoiceOverrides(parsing: "en gmw/en-US\npt roa/pt-BR\nes-AR roa/es-419\n")
        let served = VoiceCatalog(voices: Self.voices, overrides: overrides).servedVoices
        let byIdentifier = Dictionary(uniqueKeysWithValues: served.map { ($0.identifier, $0.languages) })
        #expect(byIdentifier["gmw/en-US"] == ["en", "en-US"])
        #expect(byIdentifier["gmw/en"] == ["en-GB"])
        #expect(byIdentifier["roa/pt"] == ["pt-PT"])
        #expect(byIdentifier["roa/pt-BR"] == ["pt", "pt-BR"])
        #expect(byIdentifier["roa/es-419"] == ["es-AR", "es-419", "es-MX"])
        #expect(served.count == Self.voices.count)
    }

    // MARK: - Against the installed espeak-ng and the project's overrides

    @Test func overridesFileNamesRealVoices() throws {
        let installed = Set(try EspeakVoiceList.installed().map(\.identifier))
        #expect(installed.count > 50)
        let overrides = try VoiceOverrides(contentsOf: EspeakVoiceList.overridesFile)
        for entry in overrides.entries {
            #expect(installed.contains(entry.voice), "line \(entry.line): \(entry.voice) is not an espeak-ng voice")
        }
    }

    @Test(arguments: [
        ("en", "gmw/en-US"), ("en-US", "gmw/en-US"), ("en-GB", "gmw/en"), ("en-AU", "gmw/en"),
        ("en-GB-x-rp", "gmw/en-GB-x-rp"), ("en-GB-scotland", "gmw/en-GB-scotland"),
        ("es", "roa/es"), ("es-ES", "roa/es"), ("es-AR", "roa/es-419"), ("es-MX", "roa/es-419"),
        ("es-CO", "roa/es-419"), ("es-CL", "roa/es-419"), ("es-PE", "roa/es-419"), ("es-VE", "roa/es-419"),
        ("es-US", "roa/es-419"), ("es-419", "roa/es-419"),
        ("zh", "sit/cmn"), ("zh-CN", "sit/cmn"), ("zh-TW", "sit/cmn"), ("zh-Hans-CN", "sit/cmn"),
        ("zh-HK", "sit/yue"), ("zh-MO", "sit/yue"), ("zh-Hant-HK", "sit/yue"), ("zh-yue", "sit/yue"),
        ("zh-guoyu", "sit/cmn"), ("cmn-Latn-pinyin", "sit/cmn-Latn-pinyin"),
        ("nn", "gmq/nb"), ("no", "gmq/nb"), ("nb-NO", "gmq/nb"), ("no-nyn", "gmq/nb"),
        ("pt", "roa/pt-BR"), ("pt-BR", "roa/pt-BR"), ("pt-PT", "roa/pt"), ("pt-MZ", "roa/pt"),
        ("fr", "roa/fr"), ("fr-CA", "roa/fr"), ("fr-BE", "roa/fr-BE"), ("de-AT", "gmw/de"),
        ("iw", "sem/he"), ("in-ID", "poz/id"), ("hy", "ine/hy"), ("vi-VN-x-south", "aav/vi-VN-x-south"),
        ("i-klingon", "art/piqd"), ("chr", "iro/chr"), ("en-US-x-nyc", "gmw/en-US-nyc"),
        ("yue-Latn-jyutping", "sit/yue-Latn-jyutping"), ("yue", "sit/yue"),
    ])
    func realVoicesWithTheProjectOverrides(request: String, voice: String) throws {
        let catalog = VoiceCatalog(
            voices: try EspeakVoiceList.installed(),
            overrides: try VoiceOverrides(contentsOf: EspeakVoiceList.overridesFile))
        #expect(catalog.danglingOverrides.isEmpty)
        #expect(try catalog.voice(for: Self.tag(request)).identifier == voice)
    }
}

@Suite struct InstalledVoiceReachabilityTests {
    /// Every installed espeak-ng voice is reached by at least one well-formed tag, so no voice is
    /// lost to a duplicate or ill-formed espeak tag.
    @Test func everyInstalledVoiceIsReachable() throws {
        let catalog = VoiceCatalog(
            voices: try EspeakVoiceList.installed(),
            overrides: try VoiceOverrides(contentsOf: EspeakVoiceList.overridesFile))
        let unreachable = catalog.servedVoices.filter { voice in
            !voice.languages.contains { (try? LanguageTag($0)) != nil }
        }
        #expect(unreachable.map(\.identifier) == [])
    }
}
