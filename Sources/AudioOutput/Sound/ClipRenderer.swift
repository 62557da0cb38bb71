import SpeechModel
import SpeechRendering

/// A renderer that plays recorded clips (`{"clip": "NAME"}` spans) between the speech of the
/// engines behind it: a clip is one more kind of sound behind the renderer seam, and nothing in
/// front of it (the fronts, the queue, the render cache) knows clips from speech.
///
/// An utterance without clips goes to the engines as it is. One with clips is cut at them: each
/// run of speech spans is prepared by the engines as an utterance of its own, each clip is
/// looked up in the library (an unknown one is refused naming `spans[i].clip`), and the parts are
/// played in order. A clip's chunks are at the output's loudness already (`isLevelled`), so the
/// gain that brings the engine's speech there passes them by and the two are heard alike. A clip
/// gets a `clip` event (and its span's `mark`) where it starts; a clip that cannot be decoded
/// when it is played fails the render with a detail naming it.
public struct ClipRenderer: ForwardingRenderer {
    public let base: any SpeechRenderer
    /// Where clips are found; nil refuses every clip.
    public let library: ClipLibrary?
    /// The loudness in LUFS clips are brought to (the speech's target); nil plays them as recorded.
    public let loudness: Double?

    /// - Parameters:
    ///   - base: the engines.
    ///   - library: the clips; nil when the daemon has none (`--clips` not given).
    ///   - loudness: the output's target loudness, or nil for `--loudness off`.
    public init(base: any SpeechRenderer, library: ClipLibrary?, loudness: Double?) {
        self.base = base
        self.library = library
        self.loudness = loudness
    }

    public func prepare(_ utterance: Utterance) async throws(SpeechInputError) -> PreparedUtterance {
        guard utterance.hasClips else { return try await base.prepare(utterance) }
        try utterance.validate()
        var parts: [ClipInput.Part] = []
        var gathered = PreparedParts(of: utterance)
        for run in Self.runs(utterance) {
            if let clip = utterance.spans[run.lowerBound].clip, run.count == 1 {
                let field = "spans[\(run.lowerBound)].clip"
                guard let library else {
                    throw .notFound(
                        field: field, "no clip library: speakd plays clips from the directory --clips names")
                }
                guard let file = library.file(of: clip) else {
                    throw .notFound(
                        field: field, "no clip '\(clip)' in \(library.directory.path) (GET /v1/clips lists them)")
                }
                let span = utterance.spans[run.lowerBound]
                let isLast = run.upperBound == utterance.spans.count
                parts.append(.clip(file, mark: span.mark, pauseAfter: isLast ? nil : span.pauseAfter))
                continue
            }
            let part = utterance.part(spans: run)
            guard part.spans.contains(where: { Utterance.hasSpeech($0.text) }) else {
                // Only spaces between clips: nothing for an engine, but its pauses and marks stay
                // (the last span's pause is the speaker's to play, as after speech).
                let isLast = run.upperBound == utterance.spans.count
                let pause = part.spans.dropLast(isLast ? 1 : 0).reduce(0) { $0 + ($1.pauseAfter ?? 0) }
                parts.append(.silence(seconds: pause, marks: part.spans.compactMap(\.mark)))
                continue
            }
            let prepared: PreparedUtterance
            do {
                prepared = try await base.prepare(part)
            } catch {
                throw error.reindexed(spansFrom: run.lowerBound)
            }
            parts.append(.speech(prepared, positionOffset: gathered.append(prepared)))
        }
        return PreparedUtterance(
            utterance: utterance, voices: gathered.voices, engineInput: ClipInput(parts: parts),
            textMap: gathered.textMap)
    }

    public func render(_ prepared: PreparedUtterance, chunking: RenderChunking) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        guard let input = prepared.engineInput as? ClipInput else { return base.render(prepared, chunking: chunking) }
        return .concatenating(
            input.parts.map { part in
                switch part {
                case .speech(let speech, let offset):
                    let base = base
                    return RenderedPart(positionOffset: offset) { base.render(speech, chunking: chunking) }
                case .clip(let file, let mark, let pause):
                    return RenderedPart(positionOffset: 0) { play(file, mark: mark, pauseAfter: pause) }
                case .silence(let seconds, let marks):
                    var chunk = Self.silence(seconds, format: format)
                    chunk.events = marks.map {
                        EngineEvent(kind: .mark, sample: 0, textPosition: 0, name: EngineEvent.clientMarkPrefix + $0)
                    }
                    return RenderedPart(positionOffset: 0) { [chunk] in .replaying([chunk]) }
                }
            }, channels: format.channels)
    }

    /// The spans cut into runs: each clip alone, and the spans between clips together.
    static func runs(_ utterance: Utterance) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        for (index, span) in utterance.spans.enumerated() {
            if span.clip == nil, let last = runs.last, utterance.spans[last.lowerBound].clip == nil {
                runs[runs.count - 1] = last.lowerBound..<(index + 1)
            } else {
                runs.append(index..<(index + 1))
            }
        }
        return runs
    }

    /// A clip decoded as it is played, in chunks of half a second (so pause and cancel take
    /// hold within one), with its `clip` event and its span's mark at its first sample.
    private func play(_ file: ClipLibrary.File, mark: String?, pauseAfter: Double?) -> AsyncThrowingStream<
        PCMChunk, any Error
    > {
        let (library, format, loudness) = (library, format, loudness)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do throws(ClipLibrary.Failure) {
                    guard let library else { throw ClipLibrary.Failure(description: "no clip library") }
                    let samples = try library.samples(of: file, format: format, loudness: loudness)
                    var events = [EngineEvent(kind: .clip, sample: 0, textPosition: 0, name: file.name)]
                    if let mark {
                        events.append(
                            EngineEvent(
                                kind: .mark, sample: 0, textPosition: 0, name: EngineEvent.clientMarkPrefix + mark))
                    }
                    let step = format.sampleRate / 2 * format.channels
                    var start = 0
                    while start < samples.count, !Task.isCancelled {
                        let end = min(samples.count, start + step)
                        continuation.yield(
                            PCMChunk(
                                samples: Array(samples[start..<end]), events: start == 0 ? events : [], isLevelled: true
                            ))
                        start = end
                    }
                    if let pauseAfter, pauseAfter > 0 { continuation.yield(Self.silence(pauseAfter, format: format)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private static func silence(_ seconds: Double, format: AudioFormat) -> PCMChunk {
        let frames = Int((seconds * Double(format.sampleRate)).rounded())
        return PCMChunk(samples: [Int16](repeating: 0, count: max(0, frames) * format.channels))
    }
}

/// An utterance with clips, as `ClipRenderer` prepared it: its parts in order.
struct ClipInput: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        /// A run of spans the engines speak, and where its engine input starts in the whole's text map.
        case speech(PreparedUtterance, positionOffset: Int)
        /// A clip as its file was when it was looked up; the pause after it unless it ends the utterance.
        case clip(ClipLibrary.File, mark: String?, pauseAfter: Double?)
        /// Spans with nothing to speak between clips: their pauses and marks.
        case silence(seconds: Double, marks: [String])
    }

    var parts: [Part]
}

extension ClipInput: RenderKeyEncodable {
    /// Each part: the speech as its engine prepared it, a clip by its name, path, size and time
    /// of change (a file replaced since is another key), a silence by its length and marks.
    func write(to key: inout RenderKeyWriter) {
        key.write(parts.count)
        for part in parts {
            switch part {
            case .speech(let prepared, let offset):
                key.write("speech")
                key.write(prepared)
                key.write(offset)
            case .clip(let file, let mark, let pause):
                key.write("clip")
                key.write(file.name)
                key.write(file.path)
                key.write(file.bytes)
                key.write(Int(file.modified))
                key.write(mark)
                key.write(pause)
            case .silence(let seconds, let marks):
                key.write("silence")
                key.write(seconds)
                key.write(marks)
            }
        }
    }
}
