import AnnouncementQueue
import SpeakAPI
import SpeakService

/// Cancel, pause and resume through the same door as announcements: each front calls these and
/// maps the one `SpeakError` to its protocol, as it does for a refused announcement.
extension AnnouncementIntake {
    /// Cancels `id` in whichever output's queue holds it.
    /// - Returns: whether it was waiting or speaking (false: it had finished already).
    /// - Throws: `SpeakError` 404 naming `id` when no queue knows it.
    public func cancel(id: String) async throws(SpeakError) -> Bool {
        do {
            return try await outputs.cancel(id: id)
        } catch {
            throw .scheduling(error)
        }
    }

    /// Cancels everything waiting or speaking, on one output or (nil) on all.
    /// - Returns: how many were cancelled.
    /// - Throws: `SpeakError` 422 naming `output` for an unknown output.
    public func cancelAll(output: String?) async throws(SpeakError) -> Int {
        do {
            return try await outputs.cancelAll(output: output)
        } catch {
            throw .scheduling(error)
        }
    }

    /// Pauses announcement `id` (in whichever queue holds it), or else the speaking one of
    /// `output` (nil: `default`), at once or at the end of the current word.
    /// - Throws: `SpeakError` naming `id` or `output` (404 unknown, 409 not speaking, 422 unknown output).
    public func pause(id: String?, output: String?, atWordEnd: Bool) async throws(SpeakError) -> AnnouncementStatus {
        do {
            if let id { return try await outputs.pause(id: id, atWordEnd: atWordEnd) }
            return try await speakingQueue(of: output).pause(atWordEnd: atWordEnd)
        } catch {
            throw .scheduling(error)
        }
    }

    /// Resumes paused announcement `id`, or else the paused speaking one of `output`.
    /// - Throws: `SpeakError` naming `id` or `output` (404 unknown, 409 not paused, 422 unknown output).
    public func resume(id: String?, output: String?) async throws(SpeakError) -> AnnouncementStatus {
        do {
            if let id { return try await outputs.resume(id: id) }
            return try await speakingQueue(of: output).resume()
        } catch {
            throw .scheduling(error)
        }
    }

    /// Announcement `id` as `status(id:key:)` shows it, or 404 naming `id` when no output knows it.
    public func requireStatus(id: String, key: String? = nil) async throws(SpeakError) -> AnnouncementStatus {
        guard let status = await status(id: id, key: key) else {
            throw .scheduling(.unknownAnnouncement(id))
        }
        return status
    }

    /// The `finished` event of `id`, once it has one (`?wait=true`); 404 naming `id` when no
    /// output knows it.
    public func finished(id: String) async throws(SpeakError) -> AnnouncementEvent {
        guard let event = await outputs.finished(id: id) else { throw .scheduling(.unknownAnnouncement(id)) }
        return event
    }

    /// Checks that an output called `name` exists: 422 naming `output` when none does.
    public func checkOutput(_ name: String) throws(SpeakError) {
        do {
            _ = try outputs.queue(requiring: name)
        } catch {
            throw .scheduling(error)
        }
    }

    /// The queue of `output` (nil: the default output), whose speaking announcement a pause or
    /// resume without an id acts on. (With an id, `AnnouncementOutputs` finds it, in one queue
    /// or in every zone of one heard in several.)
    private func speakingQueue(of output: String?) throws(AnnouncementQueueError) -> AnnouncementQueue {
        try outputs.queue(requiring: output ?? AnnouncementOutputs.defaultName)
    }
}
