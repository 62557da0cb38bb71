import AudioOutput
import SpeakTestSupport
import SpeechModel
import SpeechRendering
import Synchronization
import Testing

@Suite struct TrailingSilenceTrimmerTests {
    static let format = TestSignal.format
    static let sound: [Int16] = [1000, -2000, 3000, -500]

    static func silence(_ frames: Int, level: Int16 = 0) -> [Int16] {
        (0..<frames).map { $0.isMultiple(of: 2) ? level : -level }
    }

    /// Pushes `chunks` through a trimmer; returns what it released, in order, and what `finish()` said.
    static func trim(
        _ chunks: [PCMChunk], maximumHeld: Duration = .seconds(1)
    ) -> (released: [PCMChunk], releasedSilentFrames: Int, events: [EngineEvent]) {
        var trimmer = TrailingSilenceTrimmer(format: format, maximumHeld: maximumHeld)
        let released = chunks.compactMap { trimmer.push($0) }
        let (frames, events) = trimmer.finish()
        return (released, frames, events)
    }

    @Test func soundIsReleasedAtOnceAndTheSilentEndIsDropped() {
        var trimmer = TrailingSilenceTrimmer(format: Self.format)
        let first = trimmer.push(PCMChunk(samples: Self.silence(50) + Self.sound + Self.silence(300)))
        // Everything up to the last sounding sample, the silence before it included, at once.
        #expect(first?.samples == Self.silence(50) + Self.sound)
        #expect(trimmer.heldFrames == 300)
        #expect(trimmer.push(PCMChunk(samples: Self.silence(6000))) == nil)
        #expect(trimmer.heldFrames == 6300)
        let (releasedSilence, _) = trimmer.finish()
        #expect(releasedSilence == 0)
        #expect(trimmer.heldFrames == 0)
    }

    @Test func heldSilenceIsReleasedWhenSoundResumes() {
        // A pause inside the speech, across chunks, comes out whole and in order.
        let chunks = [
            PCMChunk(samples: Self.sound + Self.silence(400, level: 30)),
            PCMChunk(samples: Self.silence(2000)),
            PCMChunk(samples: Self.silence(100) + Self.sound + Self.silence(700)),
        ]
        let result = Self.trim(chunks)
        let played = result.released.flatMap(\.samples)
        #expect(
            played == Self.sound + Self.silence(400, level: 30) + Self.silence(2000) + Self.silence(100) + Self.sound)
        #expect(result.released.count == 2, "the silent chunk is held, not written alone")
    }

    @Test func quietSamplesAtTheThresholdAreSilenceAndOneAboveIsSound() {
        var trimmer = TrailingSilenceTrimmer(format: Self.format, threshold: 64)
        #expect(trimmer.push(PCMChunk(samples: [64, -64, 0])) == nil)
        #expect(trimmer.push(PCMChunk(samples: [0, -65, 3]))?.samples == [64, -64, 0, 0, -65])
    }

    @Test func holdingIsBoundedAndWhatWasReleasedIsCounted() {
        let maximum = Self.format.sampleRate / 10
        var trimmer = TrailingSilenceTrimmer(format: Self.format, maximumHeld: .milliseconds(100))
        _ = trimmer.push(PCMChunk(samples: Self.sound))
        var released = 0
        for _ in 0..<50 {
            released += trimmer.push(PCMChunk(samples: Self.silence(1000)))?.samples.count ?? 0
            #expect(trimmer.heldFrames <= maximum)
        }
        #expect(released == 50_000 - maximum)
        #expect(trimmer.finish().releasedSilentFrames == released)

        // Sound after a long pause releases the rest of it and starts a new count.
        var again = TrailingSilenceTrimmer(format: Self.format, maximumHeld: .milliseconds(100))
        _ = again.push(PCMChunk(samples: Self.silence(5000)))
        let resumed = again.push(PCMChunk(samples: Self.sound))
        #expect(resumed?.samples.count == maximum + Self.sound.count)
        #expect(again.finish().releasedSilentFrames == 0)
    }

    @Test func stereoFramesAreKeptWhole() {
        let stereo = AudioFormat(sampleRate: 22050, channels: 2)
        var trimmer = TrailingSilenceTrimmer(format: stereo)
        // The last sounding sample is a frame's left one: its right one goes with it.
        let out = trimmer.push(PCMChunk(samples: [0, 0, 900, 0, 0, 0]))
        #expect(out?.samples == [0, 0, 900, 0])
        #expect(trimmer.heldFrames == 1)
    }

    @Test func eventsOfHeldSamplesTravelWithTheNextReleaseOrComeBackAtTheEnd() {
        let word = EngineEvent(kind: .word, sample: 10, textPosition: 1, length: 3)
        let mark = EngineEvent(kind: .mark, sample: 900, textPosition: 0, name: "end")
        var trimmer = TrailingSilenceTrimmer(format: Self.format)
        #expect(trimmer.push(PCMChunk(samples: Self.silence(100), events: [word])) == nil)
        #expect(trimmer.push(PCMChunk(samples: Self.sound))?.events == [word])
        #expect(trimmer.push(PCMChunk(samples: Self.silence(100), events: [mark])) == nil)
        #expect(trimmer.finish().events == [mark])
    }
}
