import AnnouncementQueue
import FoundationEssentials
import SpeakAPI
import SpeakService
import SpeechModel

extension AnnouncementIntake {
    /// The most announcements one `POST /v1/repeat` queues again.
    public static var maximumRepeatCount: Int { SessionBook.rememberedPerOutput }

    /// Queues announcement `id` again, at the preferences of the session of the output it
    /// addressed as they are now (`POST /v1/announcements/{id}/repeat`).
    ///
    /// The repeat of a private announcement answers a `key` (which shows its text) only when
    /// `key` is the original's: a repeat is no way around the capability (docs/privacy.md).
    /// - Parameters:
    ///   - id: the announcement to say again.
    ///   - key: the key the original's poster holds, if the caller presented one.
    /// - Throws: `SpeakError`: 404 naming `id` when no output remembers it (unknown, not heard
    ///   yet, or forgotten when its session ended); any refusal of a new announcement.
    public func repeatAnnouncement(
        id: String, key: String? = nil, origin: AnnouncementOrigin = .local
    ) async throws(SpeakError) -> AnnouncementAccepted {
        do throws(SpeakError) {
            guard let remembered = await sessions.remembered(id: id) else {
                throw SpeakError.unknown(
                    field: "id", code: ErrorResponse.Code.unknownAnnouncement,
                    "no announcement with id '\(id)' is remembered for repeating: an output remembers its last "
                        + "\(SessionBook.rememberedPerOutput) heard ones until its session ends")
            }
            var holdsKey = false
            if let key, remembered.request.delivery.isPrivate { holdsKey = isKey(key, of: id) }
            return try await again(remembered, answeringKey: holdsKey, origin: origin)
        } catch {
            countRefusal(error, origin: origin)
            throw error
        }
    }

    /// Queues the last `count` announcements heard on `output` again, oldest first
    /// (`POST /v1/repeat`). A private one among them is answered without a key: no caller here
    /// has shown it holds the original's.
    /// - Throws: `SpeakError`: 422 naming `output` or `count`; 409 naming `output` when it
    ///   remembers nothing; any refusal of a new announcement.
    public func repeatLast(
        output: String?, count: Int = 1, origin: AnnouncementOrigin = .local
    ) async throws(SpeakError) -> [AnnouncementAccepted] {
        do throws(SpeakError) {
            let name = output ?? AnnouncementOutputs.defaultName
            do {
                _ = try outputs.queue(requiring: name)
            } catch {
                throw SpeakError.scheduling(error)
            }
            guard (1...Self.maximumRepeatCount).contains(count) else {
                throw SpeakError.invalid(
                    .outOfRange(field: "count", "count must be 1 to \(Self.maximumRepeatCount), not \(count)"))
            }
            let remembered = await sessions.last(count, heardOn: name)
            guard !remembered.isEmpty else {
                throw SpeakError.conflict(
                    field: "output", code: ErrorResponse.Code.nothingToRepeat,
                    "nothing to repeat: no announcement has been heard on output '\(name)' since its session "
                        + "last ended")
            }
            var accepted: [AnnouncementAccepted] = []
            for item in remembered { accepted.append(try await again(item, answeringKey: false, origin: origin)) }
            return accepted
        } catch {
            countRefusal(error, origin: origin)
            throw error
        }
    }

    /// Starts or changes a session (`PUT /v1/session`, an MQTT session command) once the engine
    /// has shown it can speak the language and voice the session names: a session that fills in
    /// a voice nobody has would make every announcement on its output fail.
    /// - Throws: `SpeakError` naming the field (`voice`, `language`, `output`, `id`, …).
    public func putSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange {
        let voice = request.voice ?? nil
        let language = request.language ?? nil
        if voice != nil || language != nil {
            _ = try await prepare(Utterance("a", defaults: SpeechAttributes(language: language, voice: voice)))
        }
        return try await sessions.put(request, privateOutputs: privateOutputs)
    }

    /// Submits `remembered` as a new announcement linked to it, and sends the `repeat` event.
    /// - Parameter answeringKey: whether the answer keeps a private repeat's key; false keeps its
    ///   text hidden from the caller like everyone else.
    private func again(
        _ remembered: SessionBook.Remembered, answeringKey: Bool, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted {
        var original = remembered.request
        // Asked for by a person: never dropped because the output is busy, never a redelivery.
        original.delivery.dropIfBusy = false
        original.requestId = nil
        original.delivery.expiresAfter = nil
        let (request, queued) = try await submitPersonalized(original, origin: origin)
        var accepted = queued
        if !answeringKey { accepted.key = nil }
        let output = request.output ?? AnnouncementOutputs.defaultName
        // A private announcement's text stays out of the stream when it is repeated too.
        var event = AnnouncementEvent(
            type: .repeat, id: accepted.id, text: request.delivery.isPrivate ? "" : request.utterance.text,
            priority: request.delivery.priority, timestamp: Date(), output: output)
        event.repeatOf = remembered.id
        outputs.publish(event)
        accepted.repeatOf = remembered.id
        return accepted
    }
}
