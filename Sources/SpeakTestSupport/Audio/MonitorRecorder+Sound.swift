import Foundation

extension MonitorRecorder {
    /// Onsets of sound after at least `gap` seconds of silence, as recorded frame indices from
    /// `fromFrame`; a frame sounds when any channel's sample is above `threshold` in magnitude.
    public func onsets(from fromFrame: Int, gap: Double = 0.25, threshold: Int) -> [Int] {
        let samples = samplesSoFar()
        let quietFrames = Int(gap * Double(sampleRate))
        var onsets: [Int] = []
        var lastAudible = Int.min / 2
        var frame = fromFrame
        while frame * channels + channels <= samples.count {
            if (0..<channels).contains(where: { abs(Int(samples[frame * channels + $0])) > threshold }) {
                if frame - lastAudible > quietFrames { onsets.append(frame) }
                lastAudible = frame
            }
            frame += 1
        }
        return onsets
    }

    /// Waits until the last 100 ms recorded are silent (no sample above `threshold` in
    /// magnitude), so one measurement does not hear the one before; gives up after 4 s.
    public func waitForSilence(threshold: Int) async throws {
        let window = sampleRate / 10 * channels
        for _ in 0..<200 {
            let samples = samplesSoFar()
            if samples.count > window, !samples.suffix(window).contains(where: { abs(Int($0)) > threshold }) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw SpeakdProcess.Failure(description: "the sink never fell silent")
    }
}

extension Duration {
    /// The duration in seconds.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
