import AnnouncementIntake
import FoundationEssentials
import Logging
import SpeakAPI
import SpeakServer
import SpeakWyoming
import SpeakdVersion
import SpeechModel
import SpeechRendering

/// The Wyoming front `--wyoming` asks for, over the daemon's intake, or nil.
func makeWyomingServer(
    _ configuration: DaemonConfiguration, intake: AnnouncementIntake, hallSound: HallSound?, logger: Logger
) throws -> WyomingServer? {
    guard let address = configuration.wyoming else {
        if configuration.wyomingSatellite != nil {
            throw DaemonStartError(description: "--wyoming-satellite: needs --wyoming ADDRESS to listen on")
        }
        return nil
    }
    var satellite: WyomingSettings.Satellite?
    if let output = configuration.wyomingSatellite {
        do {
            try intake.checkOutput(output)
        } catch {
            throw DaemonStartError(description: "--wyoming-satellite: no output is called '\(output)'")
        }
        satellite = WyomingSettings.Satellite(output: output)
    }
    var settings = WyomingSettings(version: SpeakdVersion.current, satellite: satellite)
    settings.maxTextBytes = max(4_096, intake.limits.maxTextLength * 4)
    settings.maxConnections = configuration.connectionLimits.maxConnections
    return WyomingServer(
        address: address, backend: IntakeWyomingBackend(intake: intake, hallSound: hallSound), settings: settings,
        logger: logger)
}

/// The daemon as the Wyoming front sees it: the intake's voices, renders as `POST /v1/speech`
/// makes them (the same strict decoder, the hall's loudness, no chime), and recorded audio
/// queued as an announcement that plays it.
struct IntakeWyomingBackend: WyomingBackend {
    let intake: AnnouncementIntake
    /// `POST /v1/speech`'s sound at the announcements' loudness; nil renders the engine's own.
    let hallSound: HallSound?

    /// What a recorded announcement's text says in events and the audit log.
    static let recordedText = "Home Assistant announcement"

    func voices() async throws(ErrorResponse) -> [WyomingVoice] {
        let voices: [VoiceInfo]
        do {
            voices = try await intake.renderer.voices()
        } catch {
            throw ErrorResponse(
                code: ErrorResponse.Code.internalError, message: "the voices cannot be listed: \(error)")
        }
        let identities = intake.renderer.engineIdentities
        return voices.map { voice in
            let engine = voice.engine ?? intake.renderer.engineIdentities.first?.name ?? "espeak-ng"
            let version = identities.first { $0.name == engine }?.version
            // The name a request's `"voice"` takes: a named engine's voice by its name
            // (`en_US-lessac-medium`), the primary engine's by its identifier (`gmw/en`).
            let name = intake.renderer.engineIdentities.first?.name == engine ? voice.identifier : voice.name
            let quality = voice.quality.map { ", \($0)" } ?? ""
            return WyomingVoice(
                name: name, languages: voice.languages, description: "\(voice.name) (\(engine)\(quality))",
                version: version)
        }
    }

    func render(_ speech: WyomingSpeech) async throws(ErrorResponse) -> WyomingRender {
        var body: [String: String?] = ["text": speech.text, "chime": nil, "chimeAfter": nil]
        if let voice = speech.voice { body["voice"] = voice }
        if let language = speech.language { body["language"] = language }
        let request: AnnouncementRequest
        let prepared: PreparedUtterance
        do throws(IntakeError) {
            let json: Data
            do {
                json = try JSONEncoder().encode(body)
            } catch {
                throw IntakeError.invalid(.malformed(field: nil, "\(error)"))
            }
            request = try intake.decodeNamingText(json).request
            prepared = try await intake.prepare(request).speech
        } catch {
            throw error.errorResponse
        }
        let chunks = hallSound?(request, prepared) ?? intake.renderer.render(prepared, chunking: .streaming)
        return WyomingRender(format: intake.renderer.format, chunks: Self.mappingErrors(chunks))
    }

    /// `chunks` with a refusal of the speech (a `SpeechInputError` found while rendering) as the
    /// `ErrorResponse` the HTTP API would give.
    private static func mappingErrors(
        _ chunks: AsyncThrowingStream<PCMChunk, any Error>
    ) -> AsyncThrowingStream<PCMChunk, any Error> {
        var iterator = chunks.makeAsyncIterator()
        return AsyncThrowingStream {
            do {
                return try await iterator.next()
            } catch let error as SpeechInputError {
                throw IntakeError.invalid(error).errorResponse
            }
        }
    }

    func announce(
        _ recording: WyomingRecording, output: String, origin: AnnouncementOrigin
    ) async throws(ErrorResponse) -> AnnouncementEvent {
        let body: [String: String] = ["text": Self.recordedText, "output": output]
        do throws(IntakeError) {
            let json: Data
            do {
                json = try JSONEncoder().encode(body)
            } catch {
                throw IntakeError.invalid(.malformed(field: nil, "\(error)"))
            }
            var (request, prepared) = try await intake.prepare(ahead: json, origin: origin)
            // The announcement plays what was sent instead of rendering its text.
            let samples = Self.converted(recording, to: intake.renderer.format)
            prepared.prerendered = [PCMChunk(samples: samples)]
            let accepted = try await intake.submit(ahead: prepared, original: request)
            return try await intake.finished(id: accepted.id)
        } catch {
            throw error.errorResponse
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
