import AudioOutput
import ServiceCore
import SpeakAPI
import SpeakServer
import SpeechRendering

extension AnnouncementSound {
    /// `POST /v1/speech` as the hall would hear `request`: for each repeat, its chime, the speech
    /// at the announcements' loudness under the peak limiter with the engine's trailing silence
    /// left out and the pause asked for at the end kept, and its chime after; repeats apart by
    /// their gap. What playback adds for the device alone (the lead-in, the gap between
    /// announcements) is not part of it.
    ///
    /// It is pulled, not pushed: each chunk is made when `POST /v1/speech` asks for the next,
    /// so a long render streams at its client's pace with the engine a few seconds ahead, and
    /// dropping the stream stops the engine.
    func hallSound(renderer: any SpeechRenderer) -> HallSound {
        let sound = self
        return { request, speech in
            AsyncThrowingStream(
                pulling: HallSoundIterator(sound: sound, request: request, speech: speech, renderer: renderer))
        }
    }
}

/// `AnnouncementSound.hallSound`, one chunk at a time: a repeat's gap and chime, its speech
/// through the limiter and the trimmer, its trailing pause and chime after, then the next repeat.
private struct HallSoundIterator: AsyncIteratorProtocol {
    let sound: AnnouncementSound
    let request: AnnouncementRequest
    let speech: PreparedUtterance
    let renderer: any SpeechRenderer

    private enum Step {
        /// About to begin repeat `index`.
        case begin(Int)
        /// Playing repeat `index`'s speech.
        case speaking(Int, AsyncThrowingStream<PCMChunk, any Error>.AsyncIterator, PeakLimiter?, TrailingSilenceTrimmer)
        case done
    }
    private var step = Step.begin(0)
    /// Made, not yet taken.
    private var ready: [PCMChunk] = []
    /// The loudness gain, found before the first repeat (nil: the engine's own level).
    private var gain: Double??

    init(
        sound: AnnouncementSound, request: AnnouncementRequest, speech: PreparedUtterance, renderer: any SpeechRenderer
    ) {
        self.sound = sound
        self.request = request
        self.speech = speech
        self.renderer = renderer
    }

    mutating func next() async throws -> PCMChunk? {
        let format = renderer.format
        let repeats = request.delivery.repeat ?? AnnouncementRepeat(count: 1, gap: 0)
        func silence(_ duration: Duration) -> PCMChunk? {
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            let frames = Int((seconds * Double(format.sampleRate)).rounded())
            return frames > 0 ? PCMChunk(samples: [Int16](repeating: 0, count: frames * format.channels)) : nil
        }
        while true {
            if !ready.isEmpty { return ready.removeFirst() }
            try Task.checkCancellation()
            switch step {
            case .done:
                return nil
            case .begin(let index):
                guard index < repeats.count else {
                    step = .done
                    continue
                }
                if gain == nil {
                    gain = .some(await LoudnessCalibration.playbackGain(for: speech, calibration: sound.loudness))
                }
                if index > 0, let gap = silence(.milliseconds(Int64((repeats.gap * 1000).rounded()))) {
                    ready.append(gap)
                }
                if let chime = sound.chime(request.delivery.chime, priority: request.delivery.priority) {
                    ready.append(PCMChunk(samples: chime))
                }
                let limiter = (gain ?? nil).map { PeakLimiter(gain: $0, sampleRate: format.sampleRate) }
                step = .speaking(
                    index, renderer.render(speech, chunking: .whole).makeAsyncIterator(), limiter,
                    TrailingSilenceTrimmer(format: format))
            case .speaking(let index, var chunks, var limiter, var trimmer):
                if var chunk = try await chunks.next() {
                    limiter?.process(&chunk)
                    if let kept = trimmer.push(chunk) { ready.append(kept) }
                    step = .speaking(index, chunks, limiter, trimmer)
                } else {
                    _ = trimmer.finish()
                    if let pause = silence(speech.trailingPause) { ready.append(pause) }
                    if let chimeAfter = sound.chimeAfter(
                        request.delivery.chimeAfter, priority: request.delivery.priority)
                    {
                        ready.append(PCMChunk(samples: chimeAfter))
                    }
                    step = .begin(index + 1)
                }
            }
        }
    }
}
