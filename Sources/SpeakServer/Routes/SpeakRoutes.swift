import AsyncAlgorithms
import FoundationEssentials
import HTTPTypes
import Hummingbird
import NIOCore
import SpeakAPI
import SpeakService
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// The handlers behind the routes of `SpeakServer.buildRouter()`.
struct SpeakRoutes: Sendable {
    let server: SpeakServer
    /// The rules of the listener these routes answer on: whose announcements they take.
    let access: AccessPolicy
    /// This run's epoch in event ids (`EventID`): its start in milliseconds since 1970, so ids
    /// never repeat across restarts.
    let epoch = UInt64(Date().timeIntervalSince1970 * 1000)

    var service: any SpeakService { server.service }

    // MARK: Announcements

    @Sendable func post(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let body: Data
        do {
            body = try await jsonBody(request)
        } catch let error as APIError {
            server.metrics.countRefused(error.status == .contentTooLarge ? "too_large" : "invalid")
            throw error
        }
        let wait = try boolQuery(request, "wait")
        let accepted: AnnouncementAccepted
        do {
            accepted = try await service.accept(body, origin: access.origin(of: request))
        } catch {
            throw APIError(error)
        }
        if wait {
            do {
                return try json(try await service.finished(id: accepted.id), status: .ok)
            } catch let error as SpeakError {
                throw APIError(error)
            }
        }
        var response = try json(accepted, status: .accepted)
        response.headers[.location] = "/v1/announcements/\(accepted.id)"
        return response
    }

    @Sendable func list(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let output = try outputQuery(request)
        var announcements = await service.snapshot()
        if let output { announcements.removeAll { $0.output != output } }
        return try json(AnnouncementList(announcements: announcements))
    }

    @Sendable func status(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        // A private announcement's poster holds its key (docs/privacy.md): a header, as URLs end up in logs.
        let key = request.headers[.announcementKey]
        do {
            return try json(try await service.requireStatus(id: id, key: key))
        } catch let error as SpeakError {
            throw APIError(error)
        }
    }

    @Sendable func cancel(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let cancelled: Bool
        do {
            cancelled = try await service.cancel(id: id)
        } catch {
            throw APIError(error)
        }
        return try json(CancelResult(cancelled: cancelled ? 1 : 0))
    }

    /// Pauses the announcement in the path, or the speaking one; `?at=word` waits for the end of
    /// the current word. Answers once the sink is silent.
    @Sendable func pause(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = context.parameters.get("id")
        let atWordEnd: Bool
        switch request.uri.queryParameters["at"] {
        case nil, "now": atWordEnd = false
        case "word": atWordEnd = true
        case let other?:
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "'\(other)' is not a place to pause at: use 'now' or 'word'", field: "at")
        }
        let status: AnnouncementStatus
        // An id is paused in whichever output's queue holds it; without one, `?output=`'s speaking
        // one, or the default output's.
        do {
            status = try await service.pause(
                id: id, output: request.uri.queryParameters["output"].map(String.init), atWordEnd: atWordEnd)
        } catch {
            throw APIError(error)
        }
        return try json(status)
    }

    /// Resumes the paused announcement in the path, or the paused speaking one.
    @Sendable func resume(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let id = context.parameters.get("id")
        let status: AnnouncementStatus
        do {
            status = try await service.resume(
                id: id, output: request.uri.queryParameters["output"].map(String.init))
        } catch {
            throw APIError(error)
        }
        return try json(status)
    }

    @Sendable func cancelAll(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let output = request.uri.queryParameters["output"].map(String.init)
        let cancelled: Int
        do {
            cancelled = try await service.cancelAll(output: output)
        } catch {
            throw APIError(error)
        }
        return try json(CancelResult(cancelled: cancelled))
    }

    // MARK: Events

    @Sendable func events(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let resume = try lastEventID(request)
        // Progress events (word, sentence, mark) unless `?progress=false`.
        let progress = request.uri.queryParameters["progress"] == nil ? true : try boolQuery(request, "progress")
        // One output's events with `?output=NAME`; ids and the history stay the daemon's, so a
        // resume works the same and a gap is only reported when the history lost events.
        let output = try outputQuery(request)
        let epoch = epoch
        // An id from another run of the daemon: everything of this run still in history follows,
        // after a comment saying what happened (the new epoch in the ids says it too).
        let restarted = resume.map { $0.epoch != nil && $0.epoch != epoch } ?? false
        let after = restarted ? 0 : resume?.sequence
        // The queue's own stream, so its per-subscriber bound applies: a reader that falls too far
        // behind has its stream ended and resumes with Last-Event-ID, instead of growing memory.
        let events = service.events(after: after, progress: progress)
        let heartbeat = server.settings.heartbeatInterval
        let metrics = server.metrics
        let logger = context.logger
        let headers: HTTPFields = [
            .contentType: "text/event-stream; charset=utf-8",
            .cacheControl: "no-cache",
            HTTPField.Name("X-Accel-Buffering")!: "no",
        ]
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                metrics.eventStreamOpened()
                defer { metrics.eventStreamClosed() }
                // Sent at once so the client sees the stream is open before the first event.
                try await writer.write(ByteBuffer(string: "retry: 1000\n" + ServerSentEvent.comment("speakd events")))
                if restarted, let resume {
                    try await writer.write(
                        ByteBuffer(
                            string: ServerSentEvent.comment(
                                "missed events: \(resume) is from an earlier run of speakd; this run is \(epoch)")))
                }
                // Events and heartbeats are pulled one at a time as the writer takes them, so
                // nothing queues up here: a client that stops reading stalls the writer (NIO's
                // buffer stops at its high-water mark), its subscription overflows and ends, and
                // the listener closes the stalled connection after its send timeout.
                let frames = merge(
                    chain(events.map { Frame.event($0) }, [Frame.end].async),
                    AsyncTimerSequence.repeating(every: heartbeat).map { _ in Frame.heartbeat })
                var expected = restarted ? 1 : resume.map { $0.sequence + 1 }
                for await frame in frames {
                    switch frame {
                    case .event(let sequenced):
                        if let first = expected, sequenced.sequence > first {
                            try await writer.write(
                                ByteBuffer(
                                    string: ServerSentEvent.comment(
                                        "missed events: \(epoch)-\(first) to \(epoch)-\(sequenced.sequence - 1) are no longer in the history"
                                    )))
                        }
                        expected = nil
                        if let output, sequenced.event.output != output { continue }
                        do {
                            let id = EventID(epoch: epoch, sequence: sequenced.sequence)
                            try await writer.write(
                                ByteBuffer(string: try ServerSentEvent(sequenced.event, id: id).encoded))
                        } catch let error as EncodingError {
                            logger.error("event could not be encoded", metadata: ["speakd.error": "\(error)"])
                        }
                    case .heartbeat:
                        try await writer.write(ByteBuffer(string: ServerSentEvent.comment("heartbeat")))
                    case .end:
                        try await writer.finish(nil)
                        return
                    }
                }
            })
    }

    /// What the event stream writes next.
    private enum Frame: Sendable {
        case event(SequencedAnnouncementEvent)
        case heartbeat
        case end
    }

    // MARK: Speech, voices, health, metrics

    /// Renders the utterance to one WAV. A render whose audio fits in `bufferedSeconds` is
    /// answered whole, with its length; a longer one is streamed as it renders (chunked, its
    /// header giving no length), so a render holds a few seconds of audio, not all of it. The
    /// render holds one of the service's render slots (`SpeechRender.hold`) until its last byte
    /// is handed to the connection, and stops once its audio passes the service's longest render:
    /// 413 while it is still held, or, once it streams, the connection ends before the body's
    /// last chunk (a client sees an incomplete answer, never a WAV that looks whole).
    @Sendable func speech(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let raw = try boolQuery(request, "raw")
        let render: SpeechRender
        do {
            render = try await service.render(service.limits.decodeNamingText(try await jsonBody(request)), raw: raw)
        } catch let error as SpeakError {
            throw APIError(error)
        }
        let hold = render.hold
        let format = render.format
        let bufferedSamples = Self.bufferedSeconds * format.sampleRate * format.channels
        // About three seconds: most announcements fit without the buffer growing.
        var file = WAVFile(format: format, capacity: 3 * format.sampleRate * format.channels)
        var samples = 0
        let began = ContinuousClock.now
        let audio = render.audio
        let chunks = OneReader(audio.makeAsyncIterator())
        do {
            // Past the longest render, the service's stream ends with 413 naming the text's field;
            // dropping the stream stops the synthesis.
            while samples <= bufferedSamples, let chunk = try await chunks.next() {
                samples += chunk.samples.count
                file.append(chunk.samples)
            }
        } catch let error as SpeechInputError {
            throw APIError.invalid(error)
        } catch let error as SpeakError {
            throw APIError(error)
        }
        guard samples > bufferedSamples else {
            server.metrics.countRender(duration: .now - began)
            let wav = file.finish()
            return Response(
                status: .ok, headers: [.contentType: "audio/wav", .contentLength: String(wav.readableBytes)],
                body: ResponseBody(contentLength: wav.readableBytes) { writer in
                    defer { hold.release() }
                    // In slices, each written when the connection takes more, so the slot is held
                    // until the file is nearly sent: a client that reads slowly holds its own slot,
                    // not memory beyond it. Slices share the file's storage; nothing is copied.
                    var rest = wav
                    while rest.readableBytes > 0,
                        let slice = rest.readSlice(length: min(rest.readableBytes, Self.speechSlice))
                    {
                        try await writer.write(slice)
                    }
                    try await writer.finish(nil)
                })
        }
        let held = file.streamingStart()
        let metrics = server.metrics
        let logger = server.logger
        return Response(
            status: .ok, headers: [.contentType: "audio/wav"],
            body: ResponseBody { writer in
                defer { hold.release() }
                // Each chunk is written when the connection takes it: a slow client holds back
                // the render (the engine renders a few seconds ahead of what is read), not memory.
                try await writer.write(held)
                do {
                    while let chunk = try await chunks.next() {
                        try await writer.write(WAVFile.bytes(of: chunk.samples))
                    }
                } catch let error as SpeakError {
                    logger.warning(
                        "POST /v1/speech stopped: its audio passed the limit while streaming",
                        metadata: ["speakd.error": "\(error)"])
                    throw error
                }
                metrics.countRender(duration: .now - began)
                try await writer.finish(nil)
            })
    }

    /// Seconds of audio a render holds before it streams: an announcement is answered whole.
    static let bufferedSeconds = 30

    /// How much of a WAV is handed to the connection at a time.
    private static let speechSlice = 64 * 1024

    @Sendable func voices(_ request: Request, context: BasicRequestContext) async throws -> Response {
        do {
            return try json(VoiceList(voices: try await service.voices()))
        } catch let error as SpeakError {
            throw APIError(error)
        }
    }

    @Sendable func clips(_ request: Request, context: BasicRequestContext) async throws -> Response {
        do {
            return try json(ClipList(clips: try await service.clips()))
        } catch let error as SpeakError {
            // The directory went away or became unreadable after the start.
            throw APIError(error)
        }
    }

    /// Stores the body as clip `name` (`PUT /v1/clips/{name}`, `?replace=true` to replace one):
    /// an audio file read with `collectBody(upTo:)` up to the service's clip limit; the service
    /// checks it as a file of the clip directory and refuses it when uploads are off.
    @Sendable func putClip(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let name = try context.parameters.require("name")
        let replace = try boolQuery(request, "replace")
        try Self.requireAudio(request.headers[.contentType])
        let limit = service.limits.maxClipBytes
        var request = request
        let audio: Data
        do {
            audio = Data(buffer: try await request.collectBody(upTo: limit))
        } catch is NIOTooManyBytesError {
            throw APIError.tooLarge(
                "the clip is over \(limit >> 20) MiB, the most a clip may be", field: "body")
        }
        let stored: ClipStored
        do {
            stored = try await service.putClip(name: name, audio: audio, replace: replace)
        } catch {
            throw APIError(error)
        }
        var response = try json(stored, status: stored.replaced ? .ok : .created)
        response.headers[.location] = "/v1/clips/\(name)"
        return response
    }

    /// Clip `name` as a 16-bit WAV in the engine's format, as recorded (`GET /v1/clips/{name}`).
    @Sendable func getClip(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let name = try context.parameters.require("name")
        let samples: [Int16]
        do {
            samples = try await service.clipSound(name: name)
        } catch {
            throw APIError(error)
        }
        var file = WAVFile(format: service.engineFormat, capacity: samples.count)
        file.append(samples)
        return Response(
            status: .ok, headers: [.contentType: "audio/wav", .cacheControl: "no-store"],
            body: .init(byteBuffer: file.finish()))
    }

    /// Refuses an upload not declared as audio (`audio/*`) or `application/octet-stream`.
    static func requireAudio(_ contentType: String?) throws(APIError) {
        let type = contentType?.split(separator: ";").first?.trimmingWhitespace().lowercased() ?? ""
        guard type.hasPrefix("audio/") || type == "application/octet-stream" else {
            throw .unsupportedMediaType(
                "the body is '\(contentType ?? "")'; send the clip as audio/wav, audio/flac, audio/ogg or "
                    + "application/octet-stream")
        }
    }

    @Sendable func chimes(_ request: Request, context: BasicRequestContext) async throws -> Response {
        try json(ChimeList(chimes: service.limits.chimes))
    }

    @Sendable func healthz(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let report = await service.health()
        return try json(report, status: report.status == .ok ? .ok : .serviceUnavailable)
    }

    /// An RTP output's session description (RFC 8866), for receivers configured by file.
    @Sendable func sessionDescription(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let name = try context.parameters.require("name")
        // The do block throws SpeakError alone, so the catch needs no cast (Swift 6.2's SIL
        // verifier, which the arm64 package build runs, fails on a cast from a type to itself).
        do {
            let sdp = try await service.sessionDescription(output: name)
            return Response(
                status: .ok, headers: [.contentType: "application/sdp"],
                body: .init(byteBuffer: ByteBuffer(string: sdp)))
        } catch {
            throw APIError(error)
        }
    }

    @Sendable func openAPI(_ request: Request, context: BasicRequestContext) async throws -> Response {
        Response(
            status: .ok, headers: [.contentType: WireFormat.jsonContentType],
            body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
    }

    @Sendable func metricsPage(_ request: Request, context: BasicRequestContext) async throws -> Response {
        let report = await service.health()
        let gauges = HealthGauges(
            waiting: report.queue?.waiting ?? 0, speaking: report.queue?.speaking ?? false,
            capacity: report.queue?.capacity ?? 0, sink: report.audio.sink,
            audioUp: report.audio.state == .ok, engineUp: report.engine.state != .unavailable,
            workers: report.engine.workers, outputs: report.outputs ?? [])
        let text = server.metrics.exposition(health: gauges)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: Helpers

    /// `?output=NAME` of a read, checked: nil without one, 422 naming `output` for an unknown name.
    private func outputQuery(_ request: Request) throws(APIError) -> String? {
        guard let output = request.uri.queryParameters["output"].map(String.init) else { return nil }
        do {
            try service.checkOutput(output)
        } catch {
            throw APIError(error)
        }
        return output
    }

    /// A JSON body (415 for another media type), read with Hummingbird's `collectBody(upTo:)` up to
    /// the intake's body limit, the one every front reads: over it, the intake's 413 `tooLarge`
    /// naming `body` (`AnnouncementIntake.bodyTooLarge(bytes:)`), with the declared `Content-Length`.
    /// - Parameter mergePatch: whether RFC 7396's `application/merge-patch+json` is taken too (a `PATCH`).
    func jsonBody(_ request: Request, mergePatch: Bool = false) async throws -> Data {
        try Self.requireJSON(request.headers[.contentType], mergePatch: mergePatch)
        let limit = service.limits.maxBodyBytes
        var request = request
        do {
            return Data(buffer: try await request.collectBody(upTo: limit))
        } catch is NIOTooManyBytesError {
            let declared = request.headers[.contentLength].flatMap(Int.init).flatMap { $0 > limit ? $0 : nil }
            throw APIError(service.limits.bodyTooLarge(bytes: declared))
        }
    }

    /// Refuses a body not declared `application/json` (a `charset` other than UTF-8 included):
    /// browsers post `text/plain` and forms across origins without asking first, but never JSON.
    static func requireJSON(_ contentType: String?, mergePatch: Bool = false) throws(APIError) {
        guard let contentType else {
            throw .unsupportedMediaType("the body has no Content-Type; send it as application/json")
        }
        let parts = contentType.split(separator: ";").map { $0.trimmingWhitespace() }
        let type = parts.first?.lowercased()
        guard type == "application/json" || (mergePatch && type == "application/merge-patch+json") else {
            throw .unsupportedMediaType("the body is '\(contentType)'; send it as application/json")
        }
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map {
                $0.trimming { $0.isWhitespace || $0 == "\"" }
            }
            if pair.first?.lowercased() == "charset", pair.count == 2,
                !["utf-8", "utf8"].contains(pair[1].lowercased())
            {
                throw .unsupportedMediaType("JSON must be UTF-8, not charset '\(pair[1])'")
            }
        }
    }

    private func boolQuery(_ request: Request, _ name: String) throws -> Bool {
        guard let value = request.uri.queryParameters[name[...]] else { return false }
        switch value.lowercased() {
        case "", "true", "1", "yes": return true
        case "false", "0", "no": return false
        default:
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "'\(value)' is not true or false", field: name)
        }
    }

    /// The resume point: the `Last-Event-ID` header, or `?after=` for clients that cannot set headers;
    /// `<epoch>-<sequence>` as sent, or a bare sequence number of this run (`0`: the whole history).
    /// Either one that is not an id, or that names an event of this run not sent yet, is 422
    /// naming where it came from: resuming after it would silently skip the events up to it.
    private func lastEventID(_ request: Request) throws(APIError) -> EventID? {
        let given: (text: String, field: String)
        if let header = request.headers[.lastEventID] {
            let trimmed = header.trimmingWhitespace()
            if trimmed.isEmpty { return nil }
            given = (String(trimmed), "Last-Event-ID")
        } else if let query = request.uri.queryParameters["after"] {
            given = (String(query), "after")
        } else {
            return nil
        }
        guard let id = EventID(given.text) else {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message: "'\(given.text)' is not an event id (<epoch>-<sequence> or a sequence number)",
                field: given.field)
        }
        let newest = service.lastEventSequence
        if id.epoch == nil || id.epoch == epoch, id.sequence > newest {
            throw APIError(
                status: .unprocessableContent, code: "invalidValue",
                message:
                    "'\(given.text)' is after the newest event of this run (\(EventID(epoch: epoch, sequence: newest))); "
                    + "resume from an id this stream sent, or 0 for the whole history",
                field: given.field)
        }
        return id
    }

    func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try WireFormat.encoder().encode(value)
        return Response(
            status: status, headers: [.contentType: WireFormat.jsonContentType],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
