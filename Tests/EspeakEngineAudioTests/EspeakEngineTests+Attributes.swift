import Foundation
import SpeakTestSupport
import SpeechModel
import Testing

@testable import EspeakEngine

extension EspeakEngineTests {
    static let punctuated = "Platform four, then left; the exit (north) is closed: use gate two, please"

    @Test func punctuationTrueFalseAndAbsent() async throws {
        let engine = try await Engines.engine()
        let spoken = try await engine.renderAll(
            Utterance(Self.punctuated, defaults: SpeechAttributes(punctuation: true)))
        let silent = try await engine.renderAll(
            Utterance(Self.punctuated, defaults: SpeechAttributes(punctuation: false)))
        let absent = try await engine.renderAll(Utterance(Self.punctuated))
        // Six marks, each spoken as a word ("comma", "semicolon", …).
        #expect(spoken.audio.soundingDuration() > silent.audio.soundingDuration() + 1.5)
        // Absent means the configured default, which is off here…
        #expect(abs(absent.audio.soundingDuration() - silent.audio.soundingDuration()) < 0.05)
        // …and on for an engine configured to speak punctuation.
        let speaking = try await Engines.engine { $0.speaksPunctuation = true }
        let absentSpoken = try await speaking.renderAll(Utterance(Self.punctuated))
        #expect(abs(absentSpoken.audio.soundingDuration() - spoken.audio.soundingDuration()) < 0.05)
        let explicitlySilent = try await speaking.renderAll(
            Utterance(Self.punctuated, defaults: SpeechAttributes(punctuation: false)))
        #expect(abs(explicitlySilent.audio.soundingDuration() - silent.audio.soundingDuration()) < 0.05)
    }

    /// With punctuation spoken, a mark at the very end of the text is spoken too ("dot",
    /// "question", "exclamation"), unlike espeak-ng's own `--punct` on plain text.
    @Test(arguments: [".", "?", "!"])
    func aFinalMarkIsSpokenWithPunctuation(mark: String) async throws {
        let engine = try await Engines.engine()
        let spoken = SpeechAttributes(punctuation: true)
        let bare = try await engine.renderAll(Utterance("Platform four", defaults: spoken))
        let marked = try await engine.renderAll(Utterance("Platform four\(mark)", defaults: spoken))
        let silent = try await engine.renderAll(Utterance("Platform four\(mark)"))
        let added = marked.audio.soundingDuration() - bare.audio.soundingDuration()
        // "dot", the shortest of the three names, takes about 0.3 s.
        #expect(added > 0.2, "'\(mark)' added \(added) s")
        #expect(abs(silent.audio.soundingDuration() - bare.audio.soundingDuration()) < 0.05)
    }

    @Test func punctuationAppliesToItsSpanOnly() async throws {
        let engine = try await Engines.engine()
        let spans = ["Gate two, ", "platform four, ", "exit three, please"]
        let none = try await engine.renderAll(Utterance(spans: spans.map { Span($0) }))
        let middle = try await engine.renderAll(
            Utterance(spans: [
                Span(spans[0]), Span(spans[1], attributes: SpeechAttributes(punctuation: true)), Span(spans[2]),
            ]))
        let all = try await engine.renderAll(
            Utterance(spans: spans.map { Span($0) }, defaults: SpeechAttributes(punctuation: true)))
        // One "comma" more than none, one fewer than all.
        let durations = [none, middle, all].map { $0.audio.soundingDuration() }
        #expect(durations[1] > durations[0] + 0.1, "\(durations)")
        #expect(durations[1] < durations[2] - 0.2, "\(durations)")
    }

    @Test func spellOutSpeaksEachCharacter() async throws {
        let engine = try await Engines.engine()
        let spelled = try await engine.renderAll(Utterance("07402", defaults: SpeechAttributes(spellOut: true)))
        let digits = try await engine.renderAll(Utterance("zero, seven, four, zero, two"))
        let number = try await engine.renderAll(Utterance("74,021"))
        #expect(
            try engine.espeakInput(for: Utterance("07402", defaults: SpeechAttributes(spellOut: true))).text.contains(
                "interpret-as=\"characters\""))
        // Five digit names take as long as saying them, not as long as the number.
        let ratio = spelled.audio.soundingDuration() / digits.audio.soundingDuration()
        #expect(
            ratio > 0.75 && ratio < 1.25,
            "spelled/digits ×\(ratio): \(spelled.audio.soundingDuration()) s, \(digits.audio.soundingDuration()) s")
        #expect(spelled.audio.soundingDuration() > 0.5 * number.audio.soundingDuration())
        // Each digit is its own word: at least five sounding parts separated by short gaps.
        #expect(spelled.audio.soundingSegments(minimumSilence: 0.03).count >= 5)
    }

    @Test func aLanguageSpanUsesThatLanguagesVoice() async throws {
        let engine = try await Engines.engine()
        let mixed = Utterance(
            spans: [
                Span("Next train to "),
                Span("Lisboa Santa Apolónia", attributes: SpeechAttributes(language: tag("pt-PT"))),
            ], defaults: SpeechAttributes(language: tag("en-GB")))
        let prepared = try engine.prepare(mixed)
        #expect(prepared.voices.map(\.identifier) == ["gmw/en", "roa/pt"])
        #expect(prepared.voice == "gmw/en")
        #expect(try engine.espeakInput(for: mixed).text.contains("<voice name=\"roa/pt\">"))

        let english = Utterance(
            spans: [Span("Next train to "), Span("Lisboa Santa Apolónia")],
            defaults: SpeechAttributes(language: tag("en-GB")))
        let mixedRendering = try await engine.renderAll(mixed)
        let englishRendering = try await engine.renderAll(english)
        let portuguese = try await engine.renderAll(
            Utterance("Lisboa Santa Apolónia", defaults: SpeechAttributes(language: tag("pt-PT"))))
        let englishAlone = try await engine.renderAll(
            Utterance("Lisboa Santa Apolónia", defaults: SpeechAttributes(language: tag("en-GB"))))
        // The span sounds like the Portuguese rendering of the words, not the English one.
        let spanStart = try #require(mixedRendering.spanStarts[1])
        let span = mixedRendering.audio.slice(from: spanStart, to: mixedRendering.audio.duration).soundingDuration()
        let toPortuguese = abs(span - portuguese.audio.soundingDuration())
        let toEnglish = abs(span - englishAlone.audio.soundingDuration())
        #expect(toPortuguese < 0.1, "span \(span) s, Portuguese \(portuguese.audio.soundingDuration()) s")
        #expect(toEnglish > toPortuguese)
        #expect(mixedRendering.samples != englishRendering.samples)
    }

    @Test func pauseAfterASpanIsSilence() async throws {
        let engine = try await Engines.engine()
        let rendering = try await engine.renderAll(
            Utterance(spans: [Span("Platform four", pauseAfter: 1.5), Span("thank you.")]))
        #expect(rendering.audio.longestInnerSilence() >= 1.4)
        #expect(rendering.audio.longestInnerSilence() < 2.0)
    }

    /// SSML `<p>` and `<s>` end a sentence even without final punctuation, with the pause
    /// espeak-ng's own `<p>` and `<s>` give (0.59 s at the normal rate), not one run-on sentence.
    @Test(arguments: ["p", "s"])
    func ssmlSentencesAndParagraphsArePaused(element: String) async throws {
        let engine = try await Engines.engine()
        let runOn = try await engine.renderAll(Utterance("Please wait here The train is coming"))
        #expect(runOn.audio.longestInnerSilence() < 0.25, "run-on: \(runOn.audio.longestInnerSilence()) s")

        let marked = try Utterance(
            ssml: "<speak><\(element)>Please wait here</\(element)><\(element)>The train is coming</\(element)></speak>"
        )
        let rendering = try await engine.renderAll(marked)
        let pause = rendering.audio.longestInnerSilence()
        #expect(pause > 0.45 && pause < 0.8, "<\(element)>: \(pause) s between the sentences")
        // The pause lies between the two sentences: two sounding parts, the first as long as its words.
        let parts = rendering.audio.soundingSegments(minimumSilence: 0.4)
        #expect(parts.count == 2, "\(parts)")
        let first = try await engine.renderAll(Utterance("Please wait here."))
        #expect(abs((parts.first?.duration ?? 0) - first.audio.soundingDuration()) < 0.25, "\(parts)")
        // Punctuation before the boundary does not add a second pause.
        let punctuated = try await engine.renderAll(
            try Utterance(
                ssml:
                    "<speak><\(element)>Please wait here.</\(element)><\(element)>The train is coming.</\(element)></speak>"
            ))
        #expect(abs(punctuated.audio.longestInnerSilence() - pause) < 0.1)
    }

    @Test func rateAndVolume() async throws {
        let engine = try await Engines.engine()
        let text = "The next train to the city centre departs from platform four."
        let normal = try await engine.renderAll(Utterance(text))
        let fast = try await engine.renderAll(Utterance(text, defaults: SpeechAttributes(rate: 2)))
        let slow = try await engine.renderAll(Utterance(text, defaults: SpeechAttributes(rate: 0.5)))
        let quiet = try await engine.renderAll(Utterance(text, defaults: SpeechAttributes(volume: 0.3)))
        #expect(fast.audio.soundingDuration() < 0.7 * normal.audio.soundingDuration())
        #expect(slow.audio.soundingDuration() > 1.5 * normal.audio.soundingDuration())
        #expect(quiet.audio.rms < 0.5 * normal.audio.rms)
        // A span's own rate applies to that span only.
        let spanFast = try await engine.renderAll(
            Utterance(spans: [
                Span("The next train "),
                Span("to the city centre departs from platform four.", attributes: SpeechAttributes(rate: 2)),
            ]))
        #expect(spanFast.audio.soundingDuration() < normal.audio.soundingDuration() - 0.5)
        #expect(spanFast.audio.soundingDuration() > fast.audio.soundingDuration())
    }

    @Test func theKioskVariantChangesTheVoice() async throws {
        let engine = try await Engines.engine()
        let kiosk = try await Engines.engine { $0.variant = "speakd-kiosk" }
        let text = "The next train to the city centre departs from platform four."
        let plain = try await engine.renderAll(Utterance(text))
        let varied = try await kiosk.renderAll(Utterance(text))
        // Slower (speed 88%) and lower (pitch 76–108 against the default 82–118).
        #expect(varied.audio.soundingDuration() > 1.08 * plain.audio.soundingDuration())
        #expect(try #require(varied.audio.medianF0()) < 0.97 * #require(plain.audio.medianF0()))
        // Spans in another voice keep the variant (`<voice name="roa/pt+speakd-kiosk">`).
        let mixed = Utterance(spans: [
            Span("Platform four for "),
            Span("Lisboa Santa Apolónia e Oriente", attributes: SpeechAttributes(language: tag("pt-PT"))),
        ])
        #expect(try kiosk.espeakInput(for: mixed).text.contains("<voice name=\"roa/pt+speakd-kiosk\">"))
        let mixedPlain = try await engine.renderAll(mixed)
        let mixedKiosk = try await kiosk.renderAll(mixed)
        let plainSpan = mixedPlain.audio.slice(
            from: try #require(mixedPlain.spanStarts[1]), to: mixedPlain.audio.duration)
        let kioskSpan = mixedKiosk.audio.slice(
            from: try #require(mixedKiosk.spanStarts[1]), to: mixedKiosk.audio.duration)
        #expect(kioskSpan.soundingDuration() > 1.08 * plainSpan.soundingDuration())
        // A resolver may ask for the variant itself.
        let resolved = try await Engines.engine({ _ in }, variant: "speakd-kiosk")
        let viaResolver = try await resolved.renderAll(Utterance(text))
        #expect(abs(viaResolver.audio.soundingDuration() - varied.audio.soundingDuration()) < 0.05)
    }

    @Test func ipaIsPronounced() async throws {
        let engine = try await Engines.engine()
        let word = try await engine.renderAll(Utterance("hello"))
        let ipa = try await engine.renderAll(
            Utterance(spans: [Span("hello", attributes: SpeechAttributes(ipa: "həˈloʊ"))]))
        let ratio = ipa.audio.soundingDuration() / word.audio.soundingDuration()
        #expect(ratio > 0.75 && ratio < 1.33, "IPA/word ×\(ratio)")
        let portuguese = try await engine.renderAll(
            Utterance(spans: [Span("Lisboa", attributes: SpeechAttributes(language: tag("pt-PT"), ipa: "liʒˈboɐ"))]))
        let portugueseWord = try await engine.renderAll(
            Utterance("Lisboa", defaults: SpeechAttributes(language: tag("pt-PT"))))
        let portugueseRatio = portuguese.audio.soundingDuration() / portugueseWord.audio.soundingDuration()
        #expect(portugueseRatio > 0.75 && portugueseRatio < 1.33, "IPA/word ×\(portugueseRatio)")
    }
}

extension EspeakEngineTests {
    @Test func theVoiceIsRestoredAfterASwitchOrAnAbort() async throws {
        let engine = try await Engines.engine()
        let english = Utterance("The next train departs from platform four.")
        let before = try await engine.renderAll(english)
        // Ends inside a Portuguese span.
        let mixed = Utterance(spans: [
            Span("Next train to "), Span("Lisboa Santa Apolónia", attributes: SpeechAttributes(language: tag("pt-PT"))),
        ])
        _ = try await engine.renderAll(mixed)
        let afterSwitch = try await engine.renderAll(english)
        #expect(abs(afterSwitch.audio.soundingDuration() - before.audio.soundingDuration()) < 0.05)
        // Aborted while the Portuguese voice speaks.
        let long = Utterance(spans: [
            Span("Next. "),
            Span(
                String(repeating: "Lisboa Santa Apolónia. ", count: 60),
                attributes: SpeechAttributes(language: tag("pt-PT"))),
        ])
        let consumer = Task {
            var received = 0
            for try await chunk in engine.render(long) {
                received += chunk.samples.count
                if received > 22050 * 3 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        try await consumer.value
        let afterAbort = try await engine.renderAll(english)
        #expect(abs(afterAbort.audio.soundingDuration() - before.audio.soundingDuration()) < 0.05)
        #expect(abs(try #require(afterAbort.audio.medianF0()) / #require(before.audio.medianF0()) - 1) < 0.03)
    }
}

extension EspeakEngineTests {
    @Test func punctuationDoesNotOutliveAnAbortedUtterance() async throws {
        let engine = try await Engines.engine()
        let before = try await engine.renderAll(Utterance(Self.punctuated))
        let long = Utterance(
            String(repeating: "Stop, look, listen; then go. ", count: 60), defaults: SpeechAttributes(punctuation: true)
        )
        let consumer = Task {
            var received = 0
            for try await chunk in engine.render(long) {
                received += chunk.samples.count
                if received > 22050 * 2 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        try await consumer.value
        let after = try await engine.renderAll(Utterance(Self.punctuated))
        #expect(abs(after.audio.soundingDuration() - before.audio.soundingDuration()) < 0.05)
    }
}

extension EspeakEngineTests {
    @Test func aPunctuationChangeInsideASentenceKeepsItsIntonation() async throws {
        let engine = try await Engines.engine()
        let texts = ["The next train to the airport ", "(via Oriente)", " departs from platform four."]
        let plain = try await engine.renderAll(Utterance(spans: texts.map { Span($0) }))
        let spoken = try await engine.renderAll(
            Utterance(spans: [
                Span(texts[0]), Span(texts[1], attributes: SpeechAttributes(punctuation: true)), Span(texts[2]),
            ]))
        func f0(_ rendering: EspeakEngine.Rendering, _ span: Int) throws -> Double {
            let starts = try rendering.spanStarts.map { try #require($0) }
            let end = span + 1 < starts.count ? starts[span + 1] : rendering.audio.duration
            return try #require(rendering.audio.medianF0(from: starts[span], to: end))
        }
        // The brackets are spoken, and the words around them keep their pitch.
        #expect(spoken.audio.soundingDuration() > plain.audio.soundingDuration() + 0.5)
        let before = try f0(spoken, 0) / f0(plain, 0)
        let after = try f0(spoken, 2) / f0(plain, 2)
        // espeak-ng's renderings vary by 1–2%, and a short span's median F0 more; a restarted
        // intonation contour would start the rest of the sentence clearly higher.
        #expect(abs(before - 1) <= 0.08, "before: ×\(before)")
        #expect(abs(after - 1) <= 0.08, "after: ×\(after)")
    }
}
