import Foundation
import Testing

@testable import SpeechModel

@Suite struct VoiceOverridesTests {
    @Test func parsesEntriesCommentsAndVariants() throws {
        let overrides = try VoiceOverrides(
            parsing: """
                # a comment

                EN\tgmw/en-US   # trailing comment
                  es-ar  roa/es-419  +speakd-kiosk
                zh-yue sit/yue
                """)
        #expect(overrides.entries.count == 3)
        #expect(overrides.entries[0] == VoiceOverrides.Entry(tag: try LanguageTag("en"), voice: "gmw/en-US", line: 3))
        #expect(overrides.entries[1].variant == "speakd-kiosk")
        #expect(overrides.entries[1].line == 4)
        #expect(overrides.entry(for: "ES-AR")?.voice == "roa/es-419")
        // Tags are canonicalised, so the legacy form is found under its preferred value.
        #expect(overrides.entry(for: "yue")?.voice == "sit/yue")
        #expect(overrides.entry(for: "fr") == nil)
    }

    @Test func acceptsWindowsLineEndings() throws {
        let overrides = try VoiceOverrides(parsing: "en gmw/en-US\r\nnn gmq/nb\r\n")
        #expect(overrides.entries.map(\.voice) == ["gmw/en-US", "gmq/nb"])
    }

    @Test(arguments: [
        ("en", "line 2: expected 'TAG VOICE [+VARIANT]', found 1 fields"),
        ("en gmw/en-US +a extra", "line 2: expected 'TAG VOICE [+VARIANT]', found 4 fields"),
        (
            "en_US gmw/en-US",
            "line 2: 'en_US' is not a well-formed BCP 47 tag: invalid character '_' at position 3 (subtags are separated by '-')"
        ),
        ("en gmw/en-US kiosk", "line 2: the variant 'kiosk' must be '+NAME'"),
        ("en gmw/en-US +", "line 2: the variant '+' must be '+NAME'"),
        ("en +kiosk", "line 2: '+kiosk' is not a voice identifier"),
        ("en gmw/en;rm", "line 2: 'gmw/en;rm' is not a voice identifier"),
        ("EN-us roa/es", "line 2: 'en-US' is already mapped on line 1"),
    ])
    func errorsNameTheLine(line: String, description: String) {
        let error = #expect(throws: VoiceOverridesError.self) {
            try VoiceOverrides(parsing: "en-US gmw/en-US\n\(line)\n")
        }
        #expect(error?.line == 2)
        #expect(error?.kind == "malformed")
        #expect(error?.description == description)
    }

    @Test func readsAFileAndNamesItInErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("overrides-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good")
        try "nn gmq/nb\n".write(to: good, atomically: true, encoding: .utf8)
        #expect(try VoiceOverrides(contentsOf: good).entry(for: "nn")?.voice == "gmq/nb")

        let bad = directory.appendingPathComponent("bad")
        try "# header\nnn\n".write(to: bad, atomically: true, encoding: .utf8)
        let error = #expect(throws: VoiceOverridesError.self) { try VoiceOverrides(contentsOf: bad) }
        #expect(error?.description == "\(bad.path), line 2: expected 'TAG VOICE [+VARIANT]', found 1 fields")

        let missing = directory.appendingPathComponent("missing")
        let unreadable = #expect(throws: VoiceOverridesError.self) { try VoiceOverrides(contentsOf: missing) }
        #expect(unreadable?.kind == "unreadable")
        #expect(unreadable?.path == missing.path)
        #expect(unreadable?.line == nil)
        #expect(
            unreadable?.description.hasSuffix("No such file or directory") == true, "\(String(describing: unreadable))")
    }

    @Test func theProjectFileParses() throws {
        let overrides = try VoiceOverrides(contentsOf: EspeakVoiceList.overridesFile)
        #expect(overrides.entries.count > 20)
        #expect(overrides.entry(for: "en")?.voice == "gmw/en-US")
        #expect(overrides.entry(for: "nn")?.voice == "gmq/nb")
    }
}

@Suite struct BuiltInVoiceOverridesTests {
    @Test func builtInCopyMatchesTheProjectFile() throws {
        let file = try String(contentsOf: EspeakVoiceList.overridesFile, encoding: .utf8)
        // A multi-line literal drops the final newline of the file.
        #expect(VoiceOverrides.builtInText + "\n" == file, "paste Voices/overrides into VoiceOverrides+BuiltIn.swift")
        #expect(VoiceOverrides.builtIn == (try VoiceOverrides(contentsOf: EspeakVoiceList.overridesFile)))
        #expect(VoiceOverrides.builtIn.entry(for: "es-AR")?.voice == "roa/es-419")
    }
}
