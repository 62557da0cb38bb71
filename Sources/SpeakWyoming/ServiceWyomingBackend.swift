import FoundationEssentials
import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering

/// The Wyoming front's view of the one door: the service's voices, renders as `POST /v1/speech`
/// makes them (the same strict decoder, the hall's loudness, no chime), and recorded audio
/// queued as an announcement that plays it.
public struct ServiceWyomingBackend: WyomingBackend {
    let service: any SpeakService

    /// What a recorded announcement's text says in events and the audit log.
    public static let recordedText = "Home Assistant announcement"

    /// - Parameter service: the one door every front calls.
    public init(service: any SpeakService) {
        self.service = service
    }

    public func voices() async throws(ErrorResponse) -> [WyomingVoice] {
        let voices: [VoiceInfo]
        do {
            voices = try await service.voices()
        } catch {
            throw error.response
        }
        let engines = service.engines
        let primary = engines.first?.name
        return voices.map { voice in
            let engine = voice.engine ?? primary ?? "espeak-ng"
            let version = engines.first { $0.name == engine }?.version
            // The name a request's `"voice"` takes: a named engine's voice by its name
            // (`en_US-lessac-medium`), the primary engine's by its identifier (`gmw/en`).
            let name = primary == engine ? voice.identifier : voice.name
            let quality = voice.quality.map { ", \($0)" } ?? ""
            return WyomingVoice(
                name: name, languages: voice.languages, description: "\(voice.name) (\(engine)\(quality))",
                version: version)
        }
    }

    public func render(_ speech: WyomingSpeech) async throws(ErrorResponse) -> SpeechRender {
        var body: [String: String?] = ["text": speech.text, "chime": nil, "chimeAfter": nil]
        if let voice = speech.voice { body["voice"] = voice }
        if let language = speech.language { body["language"] = language }
        do throws(SpeakError) {
            let json: Data
            do {
                json = try WireFormat.encoder().encode(body)
            } catch {
                throw SpeakError.invalid(.malformed(field: nil, "\(error)"))
            }
            let render = try await service.render(service.limits.decodeNamingText(json), raw: false)
            var mapped = render
            mapped.audio = Self.mappingErrors(render.audio, holding: render.hold)
            return mapped
        } catch {
            throw error.response
        }
    }

    /// `chunks` with a refusal of the speech (a `SpeechInputError` found while rendering, or the
    /// service's limit on a render's length) as the `ErrorResponse` the HTTP API would give. The
    /// render's slot is held until the stream ends or is dropped: the session sends each chunk
    /// as it comes, so the last one read is the last one sent.
    private static func mappingErrors(
        _ chunks: AsyncThrowingStream<PCMChunk, any Error>, holding hold: RenderHold
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        AsyncThrowingStream(pulling: MappingErrors(base: chunks.makeAsyncIterator(), hold: hold))
    }

    /// `base`'s chunks, its refusals as `ErrorResponse`s; releases `hold` when it ends.
    private struct MappingErrors: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<PCMChunk, any Error>.Iterator
        let hold: RenderHold

        mutating func next() async throws -> PCMChunk? {
            do {
                guard let chunk = try await base.next() else {
                    hold.release()
                    return nil
                }
                return chunk
            } catch let error as SpeechInputError {
                hold.release()
                throw SpeakError.invalid(error).response
            } catch let error as SpeakError {
                hold.release()
                throw error.response
            }
        }
    }

    public func announce(
        _ recording: WyomingRecording, output: String, origin: AnnouncementOrigin
    ) async throws(ErrorResponse) -> AnnouncementEvent {
        do throws(SpeakError) {
            var request = AnnouncementRequest(utterance: Utterance(Self.recordedText))
            request.output = output
            let samples = Self.converted(recording, to: service.engineFormat)
            let accepted = try await service.accept(recording: samples, as: request, origin: origin)
            return try await service.finished(id: accepted.id)
        } catch {
            throw error.response
        }
    }

    /// `recording` in `format`: channels mixed or copied, the rate changed by linear interpolation.
    static func converted(_ recording: WyomingRecording, to format: AudioFormat) -> [Int16] {
        let channels = recording.format.channels
        let frames = recording.samples.count / max(1, channels)
        var mono = [Float](repeating: 0, count: frames)
        for frame in 0..<frames {
            var sum: Float = 0
            for channel in 0..<channels { sum += Float(recording.samples[frame * channels + channel]) }
            mono[frame] = sum / Float(channels)
        }
        var resampled = mono
        if recording.format.sampleRate != format.sampleRate, frames > 1 {
            let count = Int(
                (Double(frames) * Double(format.sampleRate) / Double(recording.format.sampleRate)).rounded())
            let step = Double(recording.format.sampleRate) / Double(format.sampleRate)
            resampled = (0..<count).map { index in
                let position = Double(index) * step
                let low = min(Int(position), frames - 1)
                let high = min(low + 1, frames - 1)
                let fraction = Float(position - Double(low))
                return mono[low] * (1 - fraction) + mono[high] * fraction
            }
        }
        var samples = [Int16]()
        samples.reserveCapacity(resampled.count * format.channels)
        for value in resampled {
            let sample = Int16(max(-32_768, min(32_767, value.rounded())))
            for _ in 0..<format.channels { samples.append(sample) }
        }
        return samples
    }
}
