import FoundationEssentials
import SpeakAPI
import SpeakSchedules
import SpeechModel
import SpeechRendering
import Synchronization

/// The one door of speakd: what every front (HTTP on TCP and the Unix socket, the MQTT fleet
/// link, SSIP) and the tests call, for everything a client can ask.
///
/// A front shrinks to its protocol: it decodes what its client sent (with ``limits``), calls the
/// service, maps the one error, ``SpeakError``, to its protocol once, and writes the answer. It
/// depends on this module and the wire types (`SpeakAPI`), never on the queue, the state store or
/// the scheduler that implement it: the daemon wires those together behind this protocol.
///
/// Every method that can refuse throws `SpeakError` naming the field; a refusal of an
/// announcement is counted for `/metrics` and recorded in the audit log by the service.
public protocol SpeakService: Sendable {
    /// What a request may be: body size, text, spans, the chimes it may name.
    var limits: ServiceLimits { get }

    // MARK: Announce

    /// Decodes a body strictly (as `POST /v1/announcements` takes it), applies its output's
    /// session and queues it.
    /// - Parameters:
    ///   - body: the JSON body.
    ///   - origin: the front and who sent it there; the announcement's events and audit row carry it.
    func accept(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> AnnouncementAccepted

    /// Queues a request a front decoded or built itself (MQTT, after its message expiry; SSIP),
    /// checked within the limits as a body would be.
    func accept(_ request: AnnouncementRequest, origin: AnnouncementOrigin) async throws(SpeakError)
        -> AnnouncementAccepted

    /// Queues recorded audio as one announcement (an announce target's sound): `request` says
    /// its output, priority and chimes, and its text is what events and the audit log show; the
    /// samples, in the engine's format (``engineFormat``), are played instead of a render, at
    /// the output's loudness.
    func accept(
        recording samples: [Int16], as request: AnnouncementRequest, origin: AnnouncementOrigin
    ) async throws(SpeakError) -> AnnouncementAccepted

    /// The `finished` event of `id`, once it has one (`?wait=true`, an MQTT answer).
    func finished(id: String) async throws(SpeakError) -> AnnouncementEvent

    // MARK: Render only

    /// Renders a request without queueing or playing it (`POST /v1/speech`): the engine's own
    /// audio when `raw`, else as the hall would hear it (chimes, repeats, loudness). The keys a
    /// render does not honour are refused by name.
    func render(_ decoded: AnnouncementRequest.Decoded, raw: Bool) async throws(SpeakError) -> SpeechRender

    /// Renders a body ahead, as its output's session would have it spoken, so the render cache
    /// holds it when it is posted (`POST /v1/prerender`).
    func prerender(_ body: Data, origin: AnnouncementOrigin) async throws(SpeakError) -> Prerendered

    // MARK: Control

    /// Cancels `id`; whether it was waiting or speaking (false: it had finished already).
    func cancel(id: String) async throws(SpeakError) -> Bool
    /// Cancels everything waiting or speaking on `output`, or on every output (nil); how many.
    func cancelAll(output: String?) async throws(SpeakError) -> Int
    /// Pauses `id`, or else the speaking one of `output`, at once or at the end of its word.
    func pause(id: String?, output: String?, atWordEnd: Bool) async throws(SpeakError) -> AnnouncementStatus
    /// Resumes paused `id`, or else the paused one of `output`.
    func resume(id: String?, output: String?) async throws(SpeakError) -> AnnouncementStatus
    /// Queues announcement `id` again (`key`: the original's, which shows a private text).
    func repeatAnnouncement(id: String, key: String?, origin: AnnouncementOrigin) async throws(SpeakError)
        -> AnnouncementAccepted
    /// Queues the last `count` announcements heard on `output` again, oldest first.
    func repeatLast(output: String?, count: Int, origin: AnnouncementOrigin) async throws(SpeakError)
        -> [AnnouncementAccepted]

    // MARK: Sessions

    /// Starts or changes the session of the output the request names.
    func putSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange
    /// Every output's session.
    func sessions() async -> [SessionStatus]
    /// Ends the session of `output`, or the one with `id`.
    func endSession(output: String?, id: String?) async throws(SpeakError) -> SessionChange
    /// Ends the session a body names by its `output` or `id` alone (an MQTT end command); any
    /// other key is refused by name.
    func endSession(_ request: SessionRequest) async throws(SpeakError) -> SessionChange

    // MARK: Schedules

    /// Makes a schedule from a `POST /v1/schedules` body, read strictly; it is stored when this returns.
    func createSchedule(_ body: Data) async throws(SpeakError) -> ScheduleResource
    /// The schedule a `POST /v1/schedules` body would make and its next `count` slots from now,
    /// checked and refused as `createSchedule(_:)` would, without storing anything.
    func previewSchedule(_ body: Data, count: Int) async throws(SpeakError) -> SchedulePreview
    /// A page of schedules, oldest first, after the cursor `after`; `next` when more follow. Only
    /// those whose id, name or announcement text contains `matching` (case-insensitively) and whose
    /// `paused` is `paused`, when given; the cursor pages within that filtered list.
    func schedules(after: String?, limit: Int, matching: String?, paused: Bool?) async throws(SpeakError) -> (
        schedules: [ScheduleResource], next: String?
    )
    /// Schedule `id`.
    func schedule(id: String) async throws(SpeakError) -> ScheduleResource
    /// Applies a JSON merge patch (RFC 7396) to schedule `id`.
    func updateSchedule(id: String, patch: Data) async throws(SpeakError) -> ScheduleResource
    /// Deletes schedule `id`.
    func deleteSchedule(id: String) async throws(SpeakError)

    // MARK: Requests seen

    /// The request ids a redelivering front has seen: this run's, and with a state database the
    /// ones kept across restarts.
    var requests: any RequestMemory { get }

    // MARK: Audit

    /// A page of the audit log's rows that `query` matches, oldest first.
    func audit(_ query: AuditQuery) async throws(SpeakError) -> AuditPage

    // MARK: Events

    /// The sequence number of the newest event: following after it misses nothing from here on.
    var lastEventSequence: UInt64 { get }
    /// Every output's events after `start`, until the service shuts down; a reader that falls
    /// too far behind is subscribed again, after `.fellBehind`.
    func followEvents(after start: UInt64, progress: Bool) -> AsyncStream<EventFeed>
    /// Every output's events after `start` (the whole history when nil), ending when the reader
    /// falls too far behind: for a client that resumes by itself (`Last-Event-ID`).
    func events(after start: UInt64?, progress: Bool) -> AsyncStream<SequencedAnnouncementEvent>

    // MARK: Status

    /// Announcement `id`, also a recently finished one; nil when no output knows it. A private
    /// one shows its text only to `key`.
    func status(id: String, key: String?) async -> AnnouncementStatus?
    /// Every announcement waiting, speaking or paused, of every output.
    func snapshot() async -> [AnnouncementStatus]
    /// Engine, audio, state and fleet health, with each output's queue.
    func health() async -> HealthReport
    /// The session description (RFC 8866) of RTP output `name`, for receivers configured by
    /// file: 404 for no such output, 409 for an output that plays to a local sink.
    func sessionDescription(output name: String) async throws(SpeakError) -> String
    /// Checks that an output called `name` exists (422 naming `output`).
    func checkOutput(_ name: String) throws(SpeakError)
    /// The voices of every engine.
    func voices() async throws(SpeakError) -> [VoiceInfo]
    /// Each engine's name and version, the primary (espeak-ng) first.
    var engines: [EngineIdentity] { get }
    /// The sample format of every render and of a recording `accept(recording:as:origin:)` takes.
    var engineFormat: AudioFormat { get }
    /// The clips of the library as they are now.
    func clips() async throws(SpeakError) -> [ClipInfo]
    /// Stores `audio` (a WAV, FLAC, Ogg or Opus file) as clip `name`, checked as a file of the
    /// clip directory is: 403 (`clipUploadsOff`) unless the daemon allows uploads
    /// (`--clips-upload`); 422 naming `name` for a name that is no clip name, or naming `body`
    /// for a sound the clip check refuses (format, length, size, a NaN or infinite sample); 409
    /// naming `name` when the clip exists and `replace` is false.
    func putClip(name: String, audio: Data, replace: Bool) async throws(SpeakError) -> ClipStored
    /// The sound of clip `name` as recorded, decoded to the engine's format (``engineFormat``):
    /// 404 naming `name` when the library has no such clip.
    func clipSound(name: String) async throws(SpeakError) -> [Int16]

    /// Counts and records a refusal that a front met before it could call the service (a body
    /// over the limit, not strict JSON).
    func countRefusal(_ error: SpeakError, origin: AnnouncementOrigin, output: String?)
}

extension SpeakService {
    /// Announcement `id` as `status(id:key:)` shows it, or 404 naming `id` when no output knows it.
    public func requireStatus(id: String, key: String? = nil) async throws(SpeakError) -> AnnouncementStatus {
        guard let status = await status(id: id, key: key) else {
            throw SpeakError(
                .notFound, name: ErrorResponse.Code.unknownAnnouncement, "no announcement with id '\(id)'",
                field: "id")
        }
        return status
    }
}

/// What a front reads from ``SpeakService/followEvents(after:progress:)``.
public enum EventFeed: Sendable {
    /// The next event of any output, in sequence.
    case event(AnnouncementEvent)
    /// The reader fell too far behind and some events were dropped before it was subscribed
    /// again; it goes on with the next ones. A front settles what it may have missed from the
    /// service's own records (`status(id:key:)`, `finished(id:)`).
    case fellBehind
}

/// A render without queueing: its format, the field that carries its text (for a refusal of its
/// length), and its audio, pulled as the front writes it (dropping the stream stops the engine).
///
/// The audio is bounded: past the service's longest render it throws `SpeakError` `tooLarge`
/// naming `textField`. The render holds one of the service's render slots until the front
/// releases `hold` (or drops it): when its last byte is written.
public struct SpeechRender: Sendable {
    /// The audio's sample format.
    public var format: AudioFormat
    /// The wire field that carries the text: `text`, `spans` or `ssml`.
    public var textField: String
    /// The audio.
    public var audio: AsyncThrowingStream<PCMChunk, any Error>
    /// The render's slot: released once the front has written the audio.
    public var hold: RenderHold

    /// - Parameters: see the properties of the same names.
    public init(
        format: AudioFormat, textField: String, audio: AsyncThrowingStream<PCMChunk, any Error>,
        hold: RenderHold = RenderHold {}
    ) {
        self.format = format
        self.textField = textField
        self.audio = audio
        self.hold = hold
    }
}

/// A hold on something the service lends a front for a while (a render slot). It is given back
/// once: by `release()`, or when the hold is dropped, so a front that goes away frees it too.
public final class RenderHold: Sendable {
    private let giveBack: @Sendable () -> Void
    private let released = Atomic(false)

    /// - Parameter giveBack: what releasing does; called once.
    public init(_ giveBack: @escaping @Sendable () -> Void) {
        self.giveBack = giveBack
    }

    /// Gives it back; later calls do nothing.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        giveBack()
    }

    deinit {
        release()
    }
}

/// Which rows of the audit log to read (`GET /v1/audit`): each filter narrows; a page at most
/// `limit` rows long, after the cursor `after` (the `next` of the page before).
public struct AuditQuery: Sendable, Hashable {
    /// Rows accepted or refused at or after this time.
    public var since: Date?
    /// Rows accepted or refused before this time.
    public var until: Date?
    /// Rows spoken on this output.
    public var output: String?
    /// Rows that ended this way, and refusals with this error code.
    public var reason: String?
    /// Rows from this front (`http`, `mqtt`, `ssip`, `wyoming`, `schedule`, `local`).
    public var front: String?
    /// Rows whose stored text contains this (ASCII letters in either case); private rows never.
    public var text: String?
    /// The cursor: rows after this one.
    public var after: Int64?
    /// The most rows of one page.
    public var limit = 100

    /// No filter and no cursor: the first page of all the rows; set the properties to narrow it.
    public init() {}
}

/// The request ids a front whose transport redelivers (MQTT) has seen: the one store that makes
/// a message delivered again speak once. In this run it is always there; with a state database
/// it is kept across restarts too, so a message delivered again after a restart is answered with
/// its first outcome. Each call that cannot reach the database throws `stateUnavailable`; what
/// this run saw is still known then.
public protocol RequestMemory: Sendable {
    /// Claims `requestId`: nil when it is new (it is remembered from now on), else what became
    /// of it when it was seen before, in this run or an earlier one.
    func claim(_ requestId: String, at time: Date) async throws(SpeakError) -> SeenRequest?
    /// Records the announcement a claimed request became.
    func accepted(_ requestId: String, announcement: String) async throws(SpeakError)
    /// Records the report that answered a claimed request (its `finished` or `refused`).
    func outcome(_ requestId: String, report: Data) async throws(SpeakError)
    /// Forgets `requestId`, so a retry of it is new (nothing was queued).
    func forget(_ requestId: String) async throws(SpeakError)
}

/// What became of a request seen before: whether this run saw it (it is being or was answered
/// here), else the announcement it became before a restart and the report that answered it (nil
/// when speakd stopped before it finished).
public struct SeenRequest: Sendable, Hashable {
    /// Seen in this run: its answer is this run's to give, once.
    public var thisRun: Bool
    /// The announcement's id, once it was accepted.
    public var announcement: String?
    /// The report sent as its answer, as sent.
    public var report: Data?

    /// - Parameters: see the properties of the same names.
    public init(thisRun: Bool, announcement: String? = nil, report: Data? = nil) {
        self.thisRun = thisRun
        self.announcement = announcement
        self.report = report
    }
}
