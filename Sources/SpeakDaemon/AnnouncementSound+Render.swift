import AudioOutput
import SpeakAPI
import SpeakServer
import SpeechRendering

extension AnnouncementSound {
    /// `POST /v1/speech` as the hall would hear `request`: for each repeat, its chime, the speech
    /// at the announcements' loudness under the peak limiter with the engine's trailing silence
    /// left out and the pause asked for at the end kept, and its chime after; repeats apart by
    /// their gap. What playback adds for the device alone (the lead-in, the gap between
    /// announcements) is not part of it.
    func hallSound(renderer: any SpeechRenderer) -> HallSound {
        let sound = self
        return { request, speech in
            AsyncThrowingStream { continuation in
                let task = Task {
                    do {
                        try await sound.render(request, speech: speech, renderer: renderer) { continuation.yield($0) }
                        continuation.finish()
                    } catch {
                        continuation.finish(throwing: error)
                    }
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }
    }

    private func render(
        _ request: AnnouncementRequest, speech: PreparedUtterance, renderer: any SpeechRenderer,
        yield: (PCMChunk) -> Void
    ) async throws {
        let format = renderer.format
        let gain = await LoudnessCalibration.playbackGain(for: speech, calibration: loudness)
        let repeats = request.repeat ?? AnnouncementRepeat(count: 1, gap: 0)
        let chime = chime(request.chime, priority: request.priority)
        let chimeAfter = chimeAfter(request.chimeAfter, priority: request.priority)
        func silence(_ duration: Duration) -> PCMChunk? {
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            let frames = Int((seconds * Double(format.sampleRate)).rounded())
            return frames > 0 ? PCMChunk(samples: [Int16](repeating: 0, count: frames * format.channels)) : nil
        }
        for index in 0..<repeats.count {
            try Task.checkCancellation()
            if index > 0, let gap = silence(.milliseconds(Int64((repeats.gap * 1000).rounded()))) { yield(gap) }
            if let chime { yield(PCMChunk(samples: chime)) }
            var limiter = gain.map { PeakLimiter(gain: $0, sampleRate: format.sampleRate) }
            var trimmer = TrailingSilenceTrimmer(format: format)
            for try await var chunk in renderer.render(speech, chunking: .whole) {
                limiter?.process(&chunk.samples)
                if let kept = trimmer.push(chunk) { yield(kept) }
            }
            _ = trimmer.finish()
            if let pause = silence(speech.trailingPause) { yield(pause) }
            if let chimeAfter { yield(PCMChunk(samples: chimeAfter)) }
        }
    }
}
