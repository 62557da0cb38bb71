import AnnouncementQueue
import AudioOutput
import Logging
import SpeakAPI
import SpeechModel
import SpeechRendering

/// What the queue drives: the engine renders an announcement and the sink plays it.
///
/// A sink failure finishes the announcement `failed` (the queue does that when `speak` throws),
/// is reported to the supervisor, which marks audio unavailable and reopens the sink, and the
/// queue then waits in `waitUntilAvailable()`. Cancelling (interrupt, cancel, shutdown) flushes the sink at once.
public struct EngineSpeaker: AnnouncementSpeaker {
    let renderer: any SpeechRenderer
    let audio: AudioSupervisor
    let playback: AudioPlayback
    let sound: AnnouncementSound
    let logger: Logger
    /// Lowers other streams while an announcement is heard (`--duck`); nil for none.
    var ducker: PulseAudioDucker? = nil

    /// - Parameters:
    ///   - renderer: the engine that prepared the announcements.
    ///   - audio: the sink and its health.
    ///   - playback: how chunks are played (lead-in of silence for idle hardware, the gap between
    ///     announcements, the engine's trailing silence left out).
    ///   - sound: the chimes and the loudness; nil for none and the engine's own.
    ///   - logger: where failures are logged.
    public init(
        renderer: any SpeechRenderer, audio: AudioSupervisor, playback: AudioPlayback = AudioPlayback(),
        sound: AnnouncementSound? = nil, logger: Logger = Logger(label: "speakd.speaker")
    ) {
        self.renderer = renderer
        self.audio = audio
        self.playback = playback
        self.sound = sound ?? .plain(format: renderer.format)
        self.logger = logger
    }

    /// Renders and plays `announcement` as it was prepared when accepted; returns once the sink
    /// has played it all, reporting the voice the preparation resolved.
    ///
    /// However playing ends, a sink that failed under it is reported to the supervisor: a write
    /// or drain error is thrown here, but when the announcement is cancelled or interrupted the
    /// flush that silences it may fail or time out too (a frozen sound server), and playback
    /// throws only the cancellation. The announcement's reason stays the queue's.
    public func speak(_ announcement: Announcement) async throws -> SpeechOutcome {
        try await speak(announcement, listener: nil)
    }

    /// `speak(_:)`, telling `listener` each word, sentence and mark as the sink plays it, with
    /// its range in the announcement's text.
    public func speak(_ announcement: Announcement, listener: SpeechListener) async throws -> SpeechOutcome {
        try await speak(announcement, listener: Optional(listener))
    }

    private func speak(_ announcement: Announcement, listener: SpeechListener?) async throws -> SpeechOutcome {
        guard let lease = audio.lease() else {
            throw AudioUnavailable(detail: audio.status.detail)
        }
        let chime = sound.chime(for: announcement)
        let chimeAfter = sound.chimeAfter(for: announcement)
        let gain = await LoudnessCalibration.playbackGain(for: announcement.speech, calibration: sound.loudness)
        let repeats = announcement.delivery.repeat ?? AnnouncementRepeat(count: 1, gap: 0)
        let observer = listener.map { listener in
            let speech = announcement.speech
            return PlaybackObserver(
                event: { event, heard in
                    guard listener.wantsProgress(), var progress = speech.progress(of: event) else { return }
                    progress.heardAt = heard
                    listener.progress(progress)
                },
                firstSample: listener.firstSample, lastSound: listener.lastSound, firstSound: listener.firstSound)
        }
        ducker?.begin()
        defer { ducker?.end() }
        do {
            // Every repeat, with its chime, is part of this one call: cancelling the task stops
            // whichever is playing and the ones not yet begun.
            for index in 0..<repeats.count {
                // Rendered ahead (a scheduled announcement) the first time; a repeat renders again.
                let speech =
                    index == 0
                    ? announcement.prerendered.map(AsyncThrowingStream.replaying)
                        ?? renderer.render(announcement.speech)
                    : renderer.render(announcement.speech)
                let limiter = gain.map { PeakLimiter(gain: $0, sampleRate: renderer.format.sampleRate) }
                try await playback.play(
                    SoundStream(
                        chime: chime, speech: speech, limiter: limiter, chimeAfter: chimeAfter,
                        silenceThreshold: playback.silenceThreshold),
                    format: renderer.format,
                    trailingPause: announcement.speech.trailingPause,
                    silenceBefore: index > 0 ? .milliseconds(Int64((repeats.gap * 1000).rounded())) : .zero,
                    on: lease.sink, observer: observer)
            }
        } catch let error as AudioOutputError {
            audio.reportFailure(error, on: lease)
            throw error
        } catch {
            audio.checkSink(of: lease)
            throw error
        }
        audio.checkSink(of: lease)
        return SpeechOutcome(voice: announcement.speech.voice)
    }

    /// Waits for the audio supervisor to have a working sink.
    public func waitUntilAvailable() async {
        await audio.waitUntilAvailable()
    }

    /// Pauses the playing stream; the playback keeps what the sink discarded for the resume.
    public func pause(atWordEnd: Bool) async -> Bool {
        await playback.control.pause(atWordEnd ? .wordEnd : .now)
    }

    /// Continues the paused stream.
    public func resume() -> Bool {
        playback.control.resume()
    }
}

/// The chime, then the speech with its gain and limiter, then the chime after it, as one stream
/// of chunks: cancelling the stream stops whichever is playing and the rest.
struct SoundStream<Speech: AsyncSequence & Sendable>: AsyncSequence, Sendable where Speech.Element == PCMChunk {
    typealias Element = PCMChunk
    let chime: [Int16]?
    let speech: Speech
    let limiter: PeakLimiter?
    var chimeAfter: [Int16]? = nil
    /// The absolute sample value above which a sample sounds: word and sentence events move to
    /// the first sounding sample of their word.
    var silenceThreshold: Int16 = 64

    struct AsyncIterator: AsyncIteratorProtocol {
        var chime: [Int16]?
        var speech: Speech.AsyncIterator
        var limiter: PeakLimiter?
        var chimeAfter: [Int16]?
        var silenceThreshold: Int16
        var speechEnded = false

        /// Samples of chime before the speech: the engine's event positions count from the speech.
        var offset = 0
        /// Samples of speech before the next chunk, where the engine's positions count from.
        var speechPosition = 0

        mutating func next() async throws -> PCMChunk? {
            if let chime {
                self.chime = nil
                offset = chime.count
                return PCMChunk(samples: chime)
            }
            guard !speechEnded, var chunk = try await speech.next() else {
                // After the speech and its own trailing silence, which parts the two.
                speechEnded = true
                defer { chimeAfter = nil }
                return chimeAfter.map { PCMChunk(samples: $0) }
            }
            limiter?.process(&chunk)
            chunk.moveEventsToSound(at: speechPosition, threshold: silenceThreshold)
            speechPosition += chunk.samples.count
            if offset > 0 {
                for index in chunk.events.indices { chunk.events[index].sample += offset }
            }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            chime: chime, speech: speech.makeAsyncIterator(), limiter: limiter, chimeAfter: chimeAfter,
            silenceThreshold: silenceThreshold)
    }
}

extension PCMChunk {
    /// Moves each word and sentence event to the first sounding sample of its word, so it is
    /// heard with the sound rather than with the silent closure before it: espeak-ng places a
    /// word at its first sample, which for a word such as "two" is the 30–40 ms closure of its
    /// "t", and a client's BEGIN (SSIP 701, Chromium's `onstart`) came that much before the
    /// sound. An event moves only within this chunk and never past the next event; one whose
    /// word sounds in a later chunk stays where it is. Marks stay where the text put them.
    /// - Parameters:
    ///   - start: the position of this chunk's first sample, where event positions count from.
    ///   - threshold: the absolute sample value above which a sample sounds.
    mutating func moveEventsToSound(at start: Int, threshold: Int16) {
        let original = events
        for (index, event) in original.enumerated() where event.kind != .mark {
            let from = event.sample - start
            guard from >= 0, from < samples.count else { continue }
            let next = original[(index + 1)...].first { $0.sample > event.sample }.map { $0.sample - start }
            let end = Swift.min(samples.count, next ?? samples.count)
            guard let sounding = samples[from..<end].firstIndex(where: { $0 > threshold || $0 < -threshold })
            else { continue }
            events[index].sample = start + sounding
        }
    }
}

extension PreparedUtterance {
    /// `event` as the announcement's text has it: a word or sentence with its range and a
    /// mark with its name. Nil for the marks speakd places itself and for events the text map
    /// cannot place.
    func progress(of event: EngineEvent) -> SpeechProgress? {
        switch event.kind {
        case .word:
            guard let range = textMap?.range(of: event) else { return nil }
            return SpeechProgress(
                kind: .word, range: TextRange(location: range.lowerBound, length: range.count),
                word: utterance.text.utf16Substring(range))
        case .sentence:
            guard let sentence = textMap?.range(of: event) else { return nil }
            return SpeechProgress(
                kind: .sentence, range: TextRange(location: sentence.lowerBound, length: sentence.count))
        case .mark:
            return event.clientMarkName.map { SpeechProgress(kind: .mark, name: $0) }
        case .clip:
            return SpeechProgress(kind: .clip, name: event.name)
        }
    }

    /// The silence asked for after the last span (`pauseAfter`, an SSML `break` at the end):
    /// the engine's trailing silence is not played, so this is played in its place.
    var trailingPause: Duration {
        guard let seconds = utterance.spans.last?.pauseAfter, seconds > 0 else { return .zero }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

/// Speaking was asked for while no sink works.
struct AudioUnavailable: Error, CustomStringConvertible {
    let detail: String?
    var description: String { "the audio sink is unavailable" + (detail.map { ": \($0)" } ?? "") }
}

extension String {
    /// The text at a range of UTF-16 offsets; nil when the range is outside it. A range that
    /// splits a surrogate pair is widened to whole scalars.
    func utf16Substring(_ range: Range<Int>) -> String? {
        guard range.lowerBound >= 0, range.upperBound <= utf16.count else { return nil }
        let start = utf16.index(utf16.startIndex, offsetBy: range.lowerBound)
        let end = utf16.index(utf16.startIndex, offsetBy: range.upperBound)
        return String(self[start..<end])
    }
}
