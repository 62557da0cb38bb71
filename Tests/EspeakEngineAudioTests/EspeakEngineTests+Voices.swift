import SpeechModel
import Testing

@testable import EspeakEngine

extension EspeakEngineTests {
    @Test func voicesCarryCanonicalBCP47Tags() async throws {
        let engine = try await Engines.engine()
        let voices = try await engine.voices()
        #expect(voices.count > 100)
        #expect(voices.allSatisfy { !$0.languages.isEmpty && !$0.identifier.isEmpty })
        let tags = Set(voices.flatMap(\.languages))
        for expected in [
            "en-GB", "en-GB-scotland", "en-US", "es-419", "pt-BR", "pt", "cmn", "yue", "en-GB-x-rp", "en-US-x-nyc",
        ] {
            #expect(tags.contains(expected), "no voice serves \(expected) in \(tags.sorted())")
        }
        #expect(voices.first { $0.identifier == "roa/pt" }?.languages.first == "pt")
        for tag in tags {
            #expect((try? LanguageTag(tag)) != nil, "\(tag) is not a well-formed tag")
        }
    }

    /// A voice by name is an espeak-ng voice's identifier, as the list gives it; one that does
    /// not speak the span's language, or a name no voice has, is refused naming the field.
    @Test func voicesAreChosenByTheirIdentifier() async throws {
        let engine = try await Engines.engine()
        var utterance = Utterance("Bom dia")
        utterance.defaults.voice = "roa/pt"
        #expect(try engine.prepare(utterance).voices.first?.identifier == "roa/pt")
        utterance.defaults.language = try LanguageTag("pt-PT")
        #expect(try engine.prepare(utterance).voices.first?.identifier == "roa/pt")
        var spans = Utterance(spans: [Span("Hello "), Span("Bom dia", attributes: SpeechAttributes(voice: "roa/pt"))])
        #expect(try engine.prepare(spans).voices.map(\.identifier) == ["gmw/en", "roa/pt"])
        spans.spans[1].attributes.language = try LanguageTag("de-DE")
        func refusal(_ utterance: Utterance) -> String? {
            do {
                _ = try engine.prepare(utterance)
                return nil
            } catch {
                return error.field
            }
        }
        #expect(refusal(spans) == "spans[1].voice", "roa/pt does not speak de-DE")
        utterance.defaults.voice = "nobody"
        #expect(refusal(utterance) == "voice")
    }

    @Test(
        "espeak-ng language names become BCP 47",
        arguments: [
            ("en-gb-scotland", "en-GB-scotland"), ("es-419", "es-419"), ("pt-br", "pt-BR"), ("cmn", "cmn"),
            ("yue", "yue"), ("en-us-nyc", "en-US-x-nyc"), ("en-gb-x-rp", "en-GB-x-rp"),
            ("chr-US-Qaaa-x-west", "chr-Qaaa-US-x-west"), ("cmn-latn-pinyin", "cmn-Latn-pinyin"),
            ("fa-latn", "fa-Latn"), ("vi-vn-x-central", "vi-VN-x-central"), ("en-029", "en-029"), ("zh-yue", "yue"),
        ])
    func languageNames(espeak: String, bcp47: String) {
        #expect(EspeakLanguageName.bcp47(espeak) == bcp47)
    }

    /// The voice list is what resolution does: each voice with the tags that reach it after the
    /// overrides, as `GET /v1/voices` and `speak voices` show it.
    @Test func voicesListTheTagsThatReachThemAfterOverrides() async throws {
        let engine = try await EspeakEngine(configuration: .init(variantsDirectory: Engines.variantsDirectory)) {
            VoiceCatalog(voices: $0, overrides: .builtIn)
        }
        let voices = try await engine.voices()
        let served = Dictionary(uniqueKeysWithValues: voices.map { ($0.identifier, Set($0.languages)) })
        #expect(served["gmq/nb"]?.isSuperset(of: ["nb", "nn", "no"]) == true, "\(served["gmq/nb"] ?? [])")
        #expect(served["sit/yue"]?.isSuperset(of: ["yue", "zh-HK", "zh-MO"]) == true, "\(served["sit/yue"] ?? [])")
        #expect(served["sit/cmn"]?.contains("zh") == true)
        // `pt` reaches one voice, the override's; espeak-ng lists it under roa/pt-BR and as pt for roa/pt.
        #expect(voices.filter { $0.languages.contains("pt") }.map(\.identifier) == ["roa/pt-BR"])
        #expect(served["roa/pt"]?.contains("pt-PT") == true)
        // Each listed tag resolves to the voice that lists it, and no tag is listed twice.
        var seen: Set<String> = []
        for voice in voices {
            for language in voice.languages {
                #expect(seen.insert(language.lowercased()).inserted, "\(language) is listed twice")
                let resolved = try engine.prepare(
                    Utterance("a", defaults: SpeechAttributes(language: tag(language)))
                ).voices
                #expect(
                    resolved.first?.identifier == voice.identifier, "\(language) → \(resolved.first?.identifier ?? "")")
            }
        }
    }

    @Test func prepareNamesTheField() async throws {
        let engine = try await Engines.engine()
        func field(_ utterance: Utterance) async -> String? {
            do {
                _ = try engine.prepare(utterance)
                return nil
            } catch {
                return error.field ?? "(none)"
            }
        }
        #expect(
            await field(Utterance(spans: [Span("a"), Span("b", attributes: SpeechAttributes(pitch: 3))]))
                == "spans[1].pitch")
        #expect(await field(Utterance("a", defaults: SpeechAttributes(rate: 0.1))) == "rate")
        #expect(
            await field(Utterance(spans: [Span("a"), Span("b", attributes: SpeechAttributes(language: tag("xx-YY")))]))
                == "spans[1].language")
        #expect(await field(Utterance("a", defaults: SpeechAttributes(language: tag("xx")))) == "language")
        #expect(
            await field(Utterance(spans: [Span("click", attributes: SpeechAttributes(ipa: "ʘa"))])) == "spans[0].ipa")
        #expect(
            await field(
                Utterance(spans: [Span("Olá", attributes: SpeechAttributes(language: tag("pt-PT"), ipa: "oˈla"))]))
                == nil)
        do {
            _ = try engine.prepare(Utterance(spans: [Span("click", attributes: SpeechAttributes(ipa: "ʘa"))]))
        } catch {
            #expect(error.kind == "unsupported")
            #expect(error.message.contains("'ʘ'"))
        }
        // Rendering an invalid utterance fails before any chunk, with the same error.
        var chunks = 0
        do {
            for try await _ in engine.render(Utterance(spans: [Span("a", attributes: SpeechAttributes(volume: 3))])) {
                chunks += 1
            }
            Issue.record("an out-of-range volume rendered")
        } catch let error as SpeechInputError {
            #expect(error.field == "spans[0].volume")
        }
        #expect(chunks == 0)
    }

    @Test(
        "IPA becomes espeak-ng phonemes",
        arguments: [
            ("həˈloʊ", "h@'loU"), ("/ˈwɔːtə/", "'wO:t@"), ("θɪŋk ðæt", "TINk Dat"), ("ˈtʃɜːtʃ", "'tS3:tS"),
            ("liʒˈboɐ", "liZ'bo6"), ("ˈmɐ̃j̃", "'m6~j~"), ("ɐ̃", "6~"), ("ã", "a~"), ("ˌsɛ̃tɾu", ",sE~tru"),
            ("ˈd͡ʒɒb", "'dZ0b"),
        ])
    func ipaTable(ipa: String, espeak: String) throws {
        #expect(try IPATranscriber.espeakPhonemes(ipa) == espeak)
    }

    @Test func unsupportedIPAIsAnError() {
        #expect(throws: SpeechInputError.self) { try IPATranscriber.espeakPhonemes("ʘ") }
        do {
            _ = try IPATranscriber.espeakPhonemes("kaʘ")
        } catch {
            #expect(error.field == "ipa")
            #expect(error.message.contains("'ʘ'") && error.message.contains("U+0298"))
        }
        #expect(throws: SpeechInputError.self) { try IPATranscriber.espeakPhonemes("ˈ ") }
    }

    @Test func sentencesAreFoundAcrossSpans() {
        let starts = EspeakInput.sentenceStarts(in: ["Platform four. ", "Thank you! Bye", ", now"])
        // "Platform four. " is 15 characters; "Thank you! " 11 more.
        #expect(starts == [15, 26])
    }
}
