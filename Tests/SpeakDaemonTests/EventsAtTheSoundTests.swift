import SpeechRendering
import Testing

@testable import SpeakDaemon

/// Word and sentence events move to the first sounding sample of their word.
@Suite struct EventsAtTheSoundTests {
    private func chunk(_ samples: [Int16], _ events: [(EngineEvent.Kind, Int)]) -> PCMChunk {
        PCMChunk(samples: samples, events: events.map { EngineEvent(kind: $0.0, sample: $0.1, textPosition: 1) })
    }

    @Test func aWordMovesPastItsSilentClosureButNotPastTheNextEvent() {
        // Stream position 100: a word at 102 whose sound starts at 105; a mark at 102 stays; a
        // word at 107 that is silent up to the chunk's end stays.
        var samples = [Int16](repeating: 0, count: 10)
        samples[5] = 3_000
        samples[6] = -2_000
        var moved = chunk(samples, [(.sentence, 102), (.word, 102), (.mark, 102), (.word, 107)])
        moved.moveEventsToSound(at: 100, threshold: 64)
        #expect(moved.events.map(\.sample) == [105, 105, 102, 107])
        // A word whose sound starts after the next word's place stays where it is.
        var bounded = chunk(samples, [(.word, 101), (.word, 103)])
        bounded.moveEventsToSound(at: 100, threshold: 64)
        #expect(bounded.events.map(\.sample) == [101, 105])
        // Quiet samples at the threshold do not sound; an event of an earlier chunk stays.
        var quiet = chunk([0, 64, -64, 65], [(.word, 40), (.word, 100)])
        quiet.moveEventsToSound(at: 100, threshold: 64)
        #expect(quiet.events.map(\.sample) == [40, 103])
    }
}
