import Logging
import SpeakAPI
import SpeakService
import SpeechRendering

/// One connection's conversation: each event the peer sent, in order, answered through `send`.
///
/// The TTS server's events are answered in line (a render's audio is written as it is made, so
/// the peer's next events wait in the socket, bounded by the reader's limits); an announcement
/// waits for its `finished` in a task of its own, so `ping` is still answered meanwhile.
final class WyomingSession {
    /// Writes one event to the peer; throws when the connection is gone.
    typealias Send = @Sendable (WyomingEvent) async throws -> Void

    private let backend: any WyomingBackend
    private let settings: WyomingSettings
    private let send: Send
    private let logger: Logger
    private let peer: String

    /// The streamed synthesis under way (`synthesize-start` to `synthesize-stop`).
    private var stream: (speech: WyomingSpeech, splitter: SentenceSplitter)?
    /// Whether Home Assistant has run this connection as a satellite (`run-satellite`): its
    /// pipeline's other events are then notices, not requests.
    private var runsAsSatellite = false
    /// The announcement being received (`audio-start` to `audio-stop`).
    private var recording: WyomingRecording?
    /// Announcements waiting for their `finished`.
    private var announcing: [Task<Void, Never>] = []

    init(backend: any WyomingBackend, settings: WyomingSettings, peer: String, send: @escaping Send, logger: Logger) {
        self.backend = backend
        self.settings = settings
        self.peer = peer
        self.send = send
        self.logger = logger
    }

    /// Waits for the announcements this connection made to finish (and their `played` to be sent).
    func finish() async {
        for task in announcing { await task.value }
    }

    /// Answers `event`.
    /// - Throws: when the connection cannot be written to.
    func handle(_ event: WyomingEvent) async throws {
        switch event.type {
        case "describe":
            try await send(try await info())
        case "ping":
            try await send(WyomingEvent("pong", data: event.data["text"].map { ["text": $0] } ?? [:]))
        case "synthesize":
            try await synthesize(event)
        case "synthesize-start":
            let speech = speechOptions(event.data)
            stream = (speech, SentenceSplitter())
        case "synthesize-chunk":
            try await synthesizeChunk(event)
        case "synthesize-stop":
            try await synthesizeStop()
        case "run-satellite", "pause-satellite":
            guard settings.satellite != nil else { return try await refuseNotSatellite(event.type) }
            runsAsSatellite = event.type == "run-satellite"
        case "audio-start":
            try await audioStart(event)
        case "audio-chunk":
            try await audioChunk(event)
        case "audio-stop":
            try await audioStop()
        default:
            // A satellite hears about the whole pipeline (`detection`, `transcript`, `timer-…`).
            guard !runsAsSatellite else { return }
            try await sendError(
                ErrorResponse(
                    code: ErrorResponse.Code.malformedRequest, message: "unknown event type '\(event.type)'",
                    field: "type"))
        }
    }

    /// Sends an `error` event: `text` is the message, `code` the HTTP API's code.
    func sendError(_ error: ErrorResponse) async throws {
        logger.debug(
            "Wyoming request refused",
            metadata: ["speakd.wyoming.peer": "\(peer)", "speakd.error": "\(error.error.code): \(error)"])
        try await send(
            WyomingEvent("error", data: ["text": .string(error.description), "code": .string(error.error.code)]))
    }

    // MARK: - Describe

    private func info() async throws -> WyomingEvent {
        let voices: [WyomingVoice]
        do {
            voices = try await backend.voices()
        } catch {
            logger.warning("Wyoming describe: the voices could not be listed", metadata: ["speakd.error": "\(error)"])
            voices = []
        }
        let attribution: JSONValue = ["name": "speakd", "url": .string(settings.url)]
        let version: JSONValue = .string(settings.version)
        let program: JSONValue = [
            "name": "speakd", "attribution": attribution, "installed": true,
            "description": "speakd: espeak-ng and Piper voices, queued announcements", "version": version,
            "supports_synthesize_streaming": true,
            "voices": .array(
                voices.map {
                    [
                        "name": .string($0.name), "attribution": attribution, "installed": true,
                        "description": .string($0.description), "version": $0.version.map { .string($0) } ?? .null,
                        "languages": .array($0.languages.map { .string($0) }), "speakers": .null,
                    ]
                }),
        ]
        var data: [String: JSONValue] = [
            "asr": [], "tts": [program], "handle": [], "intent": [], "wake": [], "mic": [], "snd": [],
        ]
        if let satellite = settings.satellite {
            data["satellite"] = [
                "name": .string(satellite.name), "attribution": attribution, "installed": true,
                "description": .string("speakd announcements on the output '\(satellite.output)'"), "version": version,
                "area": .null, "has_vad": false, "active_wake_words": [], "max_active_wake_words": 0,
                "supports_trigger": false,
            ]
            data["snd"] = [
                [
                    "name": .string(satellite.output), "attribution": attribution, "installed": true,
                    "description": .string("the speakd output '\(satellite.output)'"), "version": version,
                    "snd_format": [
                        "rate": .integer(Int64(satellite.format.sampleRate)), "width": 2,
                        "channels": .integer(Int64(satellite.format.channels)),
                    ],
                ]
            ]
        }
        return WyomingEvent("info", data: data)
    }

    // MARK: - Synthesis

    private func speechOptions(_ data: [String: JSONValue]) -> WyomingSpeech {
        let voice = data["voice"]?.object
        return WyomingSpeech(text: "", voice: voice?["name"]?.string, language: voice?["language"]?.string)
    }

    private func synthesize(_ event: WyomingEvent) async throws {
        // A streaming peer sends `synthesize` too, for servers that do not stream: not spoken twice.
        // A satellite is told what its pipeline says: not spoken either (its audio follows).
        guard stream == nil, !runsAsSatellite else { return }
        guard let text = event.data["text"]?.string else {
            return try await sendError(
                ErrorResponse(
                    code: ErrorResponse.Code.malformedRequest, message: "'synthesize' needs a string 'text'",
                    field: "text"))
        }
        guard text.utf8.count <= settings.maxTextBytes else { return try await sendError(textTooLong) }
        var speech = speechOptions(event.data)
        speech.text = text
        _ = try await speak(speech)
    }

    private func synthesizeChunk(_ event: WyomingEvent) async throws {
        guard var current = stream else {
            return try await refuseOutOfOrder("synthesize-chunk", before: "synthesize-start")
        }
        guard let text = event.data["text"]?.string else {
            return try await sendError(
                ErrorResponse(
                    code: ErrorResponse.Code.malformedRequest, message: "'synthesize-chunk' needs a string 'text'",
                    field: "text"))
        }
        let sentences = current.splitter.add(text)
        guard current.splitter.pendingBytes <= settings.maxTextBytes else {
            stream = nil
            return try await sendError(textTooLong)
        }
        stream = current
        for sentence in sentences {
            var speech = current.speech
            speech.text = sentence
            // A refused sentence ends the stream: the peer has its error.
            guard try await speak(speech) else {
                stream = nil
                return
            }
        }
    }

    private func synthesizeStop() async throws {
        guard var current = stream else {
            return try await refuseOutOfOrder("synthesize-stop", before: "synthesize-start")
        }
        stream = nil
        if let rest = current.splitter.finish() {
            var speech = current.speech
            speech.text = rest
            guard try await speak(speech) else { return }
        }
        try await send(WyomingEvent("synthesize-stopped"))
    }

    private var textTooLong: ErrorResponse {
        ErrorResponse(
            code: ErrorResponse.Code.tooLarge, message: "the text is longer than \(settings.maxTextBytes) bytes",
            field: "text")
    }

    /// Renders `speech` and sends it as one `audio-start`, its chunks and one `audio-stop`.
    /// - Returns: false when it was refused (the peer was sent an `error`).
    private func speak(_ speech: WyomingSpeech) async throws -> Bool {
        let render: SpeechRender
        do {
            render = try await backend.render(speech)
        } catch {
            try await sendError(error)
            return false
        }
        let format: [String: JSONValue] = [
            "rate": .integer(Int64(render.format.sampleRate)), "width": 2,
            "channels": .integer(Int64(render.format.channels)),
        ]
        var started = false
        let step = max(1, settings.samplesPerChunk) * render.format.channels
        do {
            for try await chunk in render.audio {
                if !started {
                    try await send(WyomingEvent("audio-start", data: format))
                    started = true
                }
                var start = chunk.samples.startIndex
                while start < chunk.samples.endIndex {
                    let end = min(start + step, chunk.samples.endIndex)
                    try await send(
                        WyomingEvent("audio-chunk", data: format, payload: Self.bytes(chunk.samples[start..<end])))
                    start = end
                }
            }
        } catch let error as ErrorResponse {
            try await sendError(error)
            return false
        } catch let error as CancellationError {
            throw error
        } catch {
            try await sendError(
                ErrorResponse(code: ErrorResponse.Code.internalError, message: "the render failed: \(error)"))
            return false
        }
        if !started { try await send(WyomingEvent("audio-start", data: format)) }
        try await send(WyomingEvent("audio-stop"))
        return true
    }

    /// 16-bit little-endian PCM.
    static func bytes(_ samples: ArraySlice<Int16>) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: samples.count * 2)
        var index = 0
        for sample in samples {
            let value = UInt16(bitPattern: sample.littleEndian)
            bytes[index] = UInt8(truncatingIfNeeded: value)
            bytes[index + 1] = UInt8(truncatingIfNeeded: value >> 8)
            index += 2
        }
        return bytes
    }

    // MARK: - Announcements

    /// Ends the announcement being recorded, unspoken, and refuses the event that ended it.
    private func dropRecording(_ refusal: ErrorResponse) async throws {
        recording = nil
        try await sendError(refusal)
    }

    /// Refuses an event of a stream (`type`) that came before the event that opens it (`start`).
    private func refuseOutOfOrder(_ type: String, before start: String) async throws {
        try await sendError(
            ErrorResponse(
                code: ErrorResponse.Code.malformedRequest, message: "'\(type)' before '\(start)'", field: "type"))
    }

    private func refuseNotSatellite(_ type: String) async throws {
        try await sendError(
            ErrorResponse(
                code: "unsupported",
                message: "'\(type)': this server is not a satellite (speakd's --wyoming-satellite OUTPUT makes it one)",
                field: "type"))
    }

    private func audioFormat(_ data: [String: JSONValue], of type: String) throws(ErrorResponse) -> AudioFormat {
        guard let rate = data["rate"]?.int, let width = data["width"]?.int, let channels = data["channels"]?.int else {
            throw ErrorResponse(
                code: ErrorResponse.Code.malformedRequest, message: "'\(type)' needs integer rate, width and channels",
                field: "rate")
        }
        guard width == 2 else {
            throw ErrorResponse(
                code: "unsupported", message: "only 16-bit audio (width 2) is announced", field: "width")
        }
        guard (1...2).contains(channels) else {
            throw ErrorResponse(code: "outOfRange", message: "channels must be 1 or 2", field: "channels")
        }
        guard (8_000...48_000).contains(rate) else {
            throw ErrorResponse(code: "outOfRange", message: "rate must be 8000 to 48000 Hz", field: "rate")
        }
        return AudioFormat(sampleRate: rate, channels: channels)
    }

    private func audioStart(_ event: WyomingEvent) async throws {
        guard settings.satellite != nil else { return try await refuseNotSatellite(event.type) }
        do throws(ErrorResponse) {
            recording = WyomingRecording(format: try audioFormat(event.data, of: event.type), samples: [])
        } catch {
            try await dropRecording(error)
        }
    }

    private func audioChunk(_ event: WyomingEvent) async throws {
        guard settings.satellite != nil else { return try await refuseNotSatellite(event.type) }
        guard var current = recording else {
            return try await refuseOutOfOrder("audio-chunk", before: "audio-start")
        }
        // Chunks carry their format again; one that differs ends the announcement.
        if event.data["rate"] != nil {
            let format: AudioFormat
            do throws(ErrorResponse) {
                format = try audioFormat(event.data, of: event.type)
            } catch {
                return try await dropRecording(error)
            }
            guard format == current.format else {
                return try await dropRecording(
                    ErrorResponse(
                        code: ErrorResponse.Code.malformedRequest,
                        message: "an 'audio-chunk' is in \(format), not the \(current.format) of its 'audio-start'",
                        field: "rate"))
            }
        }
        let frameBytes = current.format.bytesPerFrame
        guard event.payload.count % frameBytes == 0 else {
            return try await dropRecording(
                ErrorResponse(
                    code: ErrorResponse.Code.malformedRequest,
                    message: "an 'audio-chunk' payload is not whole frames of \(frameBytes) bytes", field: "payload"))
        }
        let maxSamples = Int(settings.maxAnnounceSeconds) * current.format.sampleRate * current.format.channels
        guard current.samples.count + event.payload.count / 2 <= maxSamples else {
            return try await dropRecording(
                ErrorResponse(
                    code: ErrorResponse.Code.tooLarge,
                    message: "an announcement is longer than \(Int(settings.maxAnnounceSeconds)) seconds",
                    field: "payload"))
        }
        recording = nil  // the samples are moved, not copied
        current.samples.reserveCapacity(current.samples.count + event.payload.count / 2)
        var index = 0
        while index < event.payload.count {
            current.samples.append(
                Int16(bitPattern: UInt16(event.payload[index]) | UInt16(event.payload[index + 1]) << 8))
            index += 2
        }
        recording = current
    }

    private func audioStop() async throws {
        guard let satellite = settings.satellite else { return try await refuseNotSatellite("audio-stop") }
        guard let finished = recording else {
            return try await refuseOutOfOrder("audio-stop", before: "audio-start")
        }
        recording = nil
        announcing.removeAll { $0.isCancelled }
        let backend = backend
        let send = send
        let logger = logger
        let origin = AnnouncementOrigin(front: "wyoming", detail: "wyoming peer=\(peer)")
        announcing.append(
            Task {
                do throws(ErrorResponse) {
                    let event = try await backend.announce(finished, output: satellite.output, origin: origin)
                    logger.debug(
                        "Wyoming announcement finished",
                        metadata: ["speakd.id": "\(event.id)", "speakd.wyoming.peer": "\(origin.detail)"])
                } catch {
                    try? await send(
                        WyomingEvent(
                            "error", data: ["text": .string(error.description), "code": .string(error.error.code)]))
                }
                // Home Assistant waits for `played` whether the announcement was heard or not.
                try? await send(WyomingEvent("played"))
            })
    }
}
