import AnnouncementQueue
import FoundationEssentials
import Hummingbird
import SpeakAPI
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// The steps of `POST /v1/announcements` after the body has been read, shared with every other
/// way in (the MQTT fleet link), so an announcement is checked and refused the same way whatever
/// carried it.
extension SpeakServer {
    /// Decodes a request body: strict JSON, no unknown key, the text and span limits.
    /// - Throws: `APIError`, the answer `POST /v1/announcements` gives (400, 413 or 422).
    public func decodeAnnouncement(_ body: ByteBuffer) throws -> AnnouncementRequest {
        try decodeAnnouncementNamingText(body).request
    }

    /// `decodeAnnouncement(_:)`, with the wire field that carries the text (`text`, `spans` or
    /// `ssml`), for limits found later (the audio `POST /v1/speech` renders) to name it too.
    func decodeAnnouncementNamingText(_ body: ByteBuffer) throws -> (request: AnnouncementRequest, textField: String) {
        guard body.readableBytes > 0 else {
            throw APIError.malformed("the body is empty; expected a JSON object with text or spans", field: "body")
        }
        let topLevelKeys: [String]
        do {
            topLevelKeys = try StrictJSON.check(body.readableBytesView)
        } catch {
            throw APIError.strictJSON(error)
        }
        let decoded: AnnouncementRequest
        do {
            decoded = try WireFormat.decoder().decode(AnnouncementRequest.self, from: Data(buffer: body))
        } catch {
            throw APIError.decoding(error)
        }
        // The limits name the field the client wrote: an SSML document becomes spans.
        let usedSSML = topLevelKeys.contains("ssml")
        if decoded.utterance.spans.count > settings.maxSpans {
            throw APIError.tooLarge(
                "\(decoded.utterance.spans.count) spans; the limit is \(settings.maxSpans)",
                field: usedSSML ? "ssml" : "spans")
        }
        let textField = usedSSML ? "ssml" : decoded.utterance.spans.count == 1 ? "text" : "spans"
        let length = decoded.utterance.text.count
        if length > settings.maxTextLength {
            throw APIError.tooLarge(
                "the text is \(length) characters; the limit is \(settings.maxTextLength)", field: textField)
        }
        return (decoded, textField)
    }

    /// Checks that the chimes `request` names (`chime`, `chimeAfter`) are configured.
    /// - Throws: `APIError` 422 `notFound` naming the field and the chimes there are.
    public func checkChimes(of request: AnnouncementRequest) throws(APIError) {
        for (field, choice) in [("chime", request.chime), ("chimeAfter", request.chimeAfter)] {
            if case .named(let name) = choice, !settings.chimes.contains(name) {
                let known = settings.chimes.isEmpty ? "none are configured" : settings.chimes.joined(separator: ", ")
                throw APIError.invalid(.notFound(field: field, "no chime named '\(name)' (\(known))"))
            }
        }
    }

    /// Validates and compiles `utterance` once, at the edge; the result travels with it.
    /// - Throws: `APIError` 422 naming the field.
    public func prepare(_ utterance: Utterance) async throws -> PreparedUtterance {
        do {
            return try await renderer.prepare(utterance)
        } catch {
            throw APIError.invalid(error)
        }
    }

    /// Hands a decoded and prepared announcement to the queue of the output it names, counting it
    /// in the metrics.
    /// - Throws: `APIError` 422 `invalidValue` naming `output` for an output this server does not
    ///   have, 503 `audioUnavailable` while that output's sink is down (another output's does not
    ///   matter), 429 `queueFull`, 422 `invalidValue`, 503 `shuttingDown`.
    public func submit(_ body: AnnouncementRequest, speech: PreparedUtterance) async throws -> AnnouncementAccepted {
        let queue: AnnouncementQueue
        do {
            queue = try outputs.queue(for: body)
        } catch {
            metrics.countRefused("invalid")
            throw APIError.scheduling(error)
        }
        let health = await health.health()
        let audio =
            health.outputs?.first { $0.name == queue.output }.map { ($0.state, $0.detail) }
            ?? (health.audio.state, health.audio.detail)
        guard audio.0 == .ok else {
            metrics.countRefused("audio_unavailable")
            throw APIError.audioUnavailable(audio.1)
        }
        let accepted: AnnouncementAccepted
        do {
            accepted = try await queue.submit(body, speech: speech)
        } catch {
            metrics.countRefused(
                error.isQueueFull ? "queue_full" : error.isShuttingDown ? "shutting_down" : "invalid")
            throw APIError.scheduling(error)
        }
        metrics.countAccepted(body.priority)
        return accepted
    }

    /// Counts an announcement refused before `submit` (a body that does not decode or prepare),
    /// as the HTTP route does.
    public func countRefusal(_ error: APIError) {
        metrics.countRefused(error.status == .contentTooLarge ? "too_large" : "invalid")
    }
}
