import Foundation
import SpeechModel
import SpeechRendering
import Synchronization

/// The tests' one fake engine. It prepares as an engine does (the values checked, clips refused,
/// a language it has no voice for or a text it will not speak refused naming the field), renders
/// the sound a test chose, and counts what it prepares and renders; its copies share the counts.
public struct FakeRenderer: SpeechRenderer {
    /// The sound of each render: chunks made from the utterance.
    public struct Sound: Sendable {
        let chunks: @Sendable (Utterance, AudioFormat) -> [PCMChunk]

        /// `chunks` chunks of `samples` samples, chunk `n` all of value `n + 1` with a word event
        /// at its start.
        public static func steps(chunks: Int = 3, samples: Int = 1_000) -> Sound {
            Sound { _, _ in
                (0..<chunks).map { index in
                    PCMChunk(
                        samples: Array(repeating: Int16(index + 1), count: samples),
                        events: [EngineEvent(kind: .word, sample: index * samples, textPosition: index)])
                }
            }
        }

        /// A sine tone of `samples` samples for each span, a chunk each.
        public static func tonePerSpan(samples: Int) -> Sound {
            Sound { utterance, _ in
                let tone = (0..<samples).map { Int16(sin(Double($0) * 0.1) * 8_000) }
                return utterance.spans.map { _ in PCMChunk(samples: tone) }
            }
        }

        /// A constant `level`, `perCharacter` samples for each character of the text, in chunks of 0.1 s as an
        /// engine streams, with a word event at sample 100 covering the whole text and a sentence
        /// event at sample 3,000 (in the second chunk: its position counts from the utterance's
        /// first frame, not from its chunk's).
        public static func level(_ level: Int16, perCharacter: Int) -> Sound {
            Sound { utterance, format in
                let text = utterance.text
                let frames = text.count * perCharacter
                let chunk = format.sampleRate / 10
                let events = [
                    EngineEvent(kind: .word, sample: 100, textPosition: 1, length: text.unicodeScalars.count),
                    EngineEvent(kind: .sentence, sample: 3_000, textPosition: 1),
                ]
                return stride(from: 0, to: frames, by: chunk).map { start in
                    PCMChunk(
                        samples: [Int16](repeating: level, count: min(chunk, frames - start)),
                        events: events.filter { (start..<(start + chunk)).contains($0.sample) })
                }
            }
        }

        /// `chunks` chunks of `samples` silent samples, whatever the text.
        public static func silence(chunks: Int, samples: Int) -> Sound {
            Sound { _, _ in Array(repeating: PCMChunk(samples: Array(repeating: 0, count: samples)), count: chunks) }
        }
    }

    /// What a preparation hands the engine.
    public enum Input: Sendable {
        /// The text: the same text prepared twice is the same preparation, as the render cache
        /// keys it.
        case text
        /// The preparation's serial number (from 1), so a test can tell which preparation
        /// reached the engine.
        case serial
    }

    /// How often `prepare` was called, and what was rendered; shared by a renderer's copies.
    public final class Counts: Sendable {
        private let state = Mutex((prepared: 0, renders: 0, rendered: [Int]()))

        /// The calls of `prepare`, refused ones too.
        public var prepared: Int { state.withLock { $0.prepared } }
        /// The renders started.
        public var renders: Int { state.withLock { $0.renders } }
        /// The serial numbers of the preparations rendered (with `Input.serial`).
        public var rendered: [Int] { state.withLock { $0.rendered } }

        func nextPreparation() -> Int {
            state.withLock {
                $0.prepared += 1
                return $0.prepared
            }
        }

        func render(serial: Int?) {
            state.withLock {
                $0.renders += 1
                if let serial { $0.rendered.append(serial) }
            }
        }
    }

    public let format = AudioFormat(sampleRate: 22_050)
    /// What each render yields.
    public var sound: Sound
    /// What a preparation hands the engine.
    public var input: Input
    /// The languages it has a voice for (canonical tags); nil for any.
    public var languages: Set<String>?
    /// A word it refuses to speak: a span whose text holds it is refused, naming the span's text.
    public var unspeakable: String?
    /// What it counted.
    public let counts = Counts()

    /// - Parameters:
    ///   - sound: the sound of each render.
    ///   - input: what a preparation hands the engine.
    ///   - languages: the languages it has a voice for; nil for any.
    ///   - unspeakable: a word it refuses to speak.
    public init(
        sound: Sound = .steps(), input: Input = .text, languages: Set<String>? = nil, unspeakable: String? = nil
    ) {
        self.sound = sound
        self.input = input
        self.languages = languages
        self.unspeakable = unspeakable
    }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        let serial = counts.nextPreparation()
        try utterance.validate()
        try utterance.checkHasNoClips()
        if let languages, let tag = utterance.defaults.language, !languages.contains(tag.canonical) {
            throw .notFound(field: "language", "no voice speaks '\(tag)'")
        }
        for (index, span) in utterance.spans.enumerated() {
            if let languages, let tag = span.attributes.language, !languages.contains(tag.canonical) {
                throw .notFound(field: "spans[\(index)].language", "no voice speaks '\(tag)'")
            }
            if let unspeakable, span.text.contains(unspeakable) {
                throw .malformed(field: "spans[\(index)].text", "\(unspeakable) is not spoken here")
            }
        }
        // Each character of the text is one position of the engine's input.
        let text = utterance.text
        var map = TextOffsetMap(textLength: text.utf16.count)
        var offset = 0
        for character in text {
            let length = String(character).utf16.count
            map.append(scalars: character.unicodeScalars.count, from: offset..<(offset + length))
            offset += length
        }
        let voice = VoiceInfo(identifier: utterance.defaults.voice ?? "tone", name: "Tone", languages: ["en"])
        let engineInput: any Sendable & Hashable =
            switch input {
            case .text: text
            case .serial: serial
            }
        return PreparedUtterance(
            utterance: utterance, voices: utterance.spans.map { _ in voice }, engineInput: engineInput, textMap: map)
    }

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        switch input {
        case .text: counts.render(serial: nil)
        case .serial:
            do {
                counts.render(serial: try prepared.input(as: Int.self))
            } catch {
                return AsyncThrowingStream { $0.finish(throwing: error) }
            }
        }
        return .replaying(sound.chunks(prepared.utterance, format))
    }

    public func voices() async throws -> [VoiceInfo] {
        [
            VoiceInfo(identifier: "gmw/en", name: "English", languages: ["en-GB", "en"]),
            VoiceInfo(identifier: "roa/pt", name: "Portuguese", languages: ["pt-PT", "pt"]),
        ]
    }
}
