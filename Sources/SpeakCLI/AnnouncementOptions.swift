import ArgumentParser
import Foundation
import SpeakAPI
import SpeechModel

/// The options that make an announcement's request body, and TEXT: what `speak` posts to
/// `/v1/announcements` and what `speak schedule add` schedules, declared once for both.
struct AnnouncementOptions: ParsableArguments {
    @OptionGroup var speech: SpeechOptions

    @Option(
        name: .customLong("priority"),
        help: "How urgent (default: default; with --json, the request's priority).")
    var priorityOption: AnnouncementPriority?

    /// The priority the flags ask for; a `--json` request's own priority applies when the flag is absent.
    var priority: AnnouncementPriority { priorityOption ?? .default }

    @Flag(help: "Interrupt a speaking default or low announcement (the wire format's queue: false).")
    var interrupt = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds it may wait in the daemon's queue before it is dropped as expired.", valueName: "seconds"))
    var expiresAfter: Double?

    @Option(
        help: ArgumentHelp(
            "The daemon's chime to play before the speech (GET /v1/chimes lists them), or none.", valueName: "name")
    )
    var chime: String?

    @Option(
        help: ArgumentHelp("The daemon's chime to play after the speech, or none.", valueName: "name"))
    var chimeAfter: String?

    @Option(
        name: .customLong("repeat"),
        help: ArgumentHelp("Speak it this many times (1-10) as one announcement.", valueName: "n"))
    var repeatCount: Int?

    @Option(help: ArgumentHelp("Seconds of silence between repeats (0-10, default 1).", valueName: "seconds"))
    var repeatGap: Double?

    @Option(
        help: ArgumentHelp(
            "The daemon's named output to speak on (its --output NAME=SINK), e.g. headset, or a zone group, or "
                + "several outputs at once as one announcement: platform1,platform2; default: default.",
            valueName: "name[,name…]"))
    var to: String?

    @Flag(
        name: .customLong("private"),
        help: ArgumentHelp(
            "Speak it only on the daemon's private output (--output NAME=SINK,private), never aloud, and keep "
                + "its text out of logs and events."))
    var isPrivate = false

    @Option(
        help: ArgumentHelp(
            "Read a request body in the wire format (JSON) from FILE, or - for standard input; the flags given override its values.",
            valueName: "file"))
    var json: String?

    @Flag(help: "TEXT is SSML (speak, voice, prosody, say-as characters, break, s, p, audio src=\"clip:NAME\").")
    var ssml = false

    @Option(
        name: .customLong("clip"),
        help: ArgumentHelp(
            "Play the daemon's recorded clip NAME before the text (GET /v1/clips lists them); give it again for more, "
                + "in order. With no TEXT only the clips are played.",
            valueName: "name"))
    var clips: [String] = []

    @Argument(help: "The text to speak; standard input when none is given.")
    var text: [String] = []

    func validate() throws {
        if json != nil, !text.isEmpty {
            throw ValidationError("--json reads the request from a file; give no TEXT with it")
        }
        if json != nil, ssml {
            throw ValidationError("--json and --ssml are two input formats; give one")
        }
        if json != nil, !clips.isEmpty {
            throw ValidationError("--json reads the whole request: put the clips in its spans ({\"clip\": \"NAME\"})")
        }
        if let clip = clips.first(where: { !Span.isValidClipName($0) }) {
            throw ValidationError(
                "--clip \(clip): not a clip name (letters, digits, '.', '-', '_', starting with a letter or digit)")
        }
        if let expiresAfter, !(expiresAfter > 0 && expiresAfter.isFinite) {
            throw ValidationError("--expires-after \(expiresAfter): must be a positive number of seconds")
        }
        if repeatGap != nil, repeatCount == nil {
            throw ValidationError("--repeat-gap needs --repeat N")
        }
        if let repetition {
            do {
                try repetition.validate()
            } catch {
                throw ValidationError("--repeat: \(error.message)")
            }
        }
    }

    /// The repeat the flags ask for.
    var repetition: AnnouncementRepeat? {
        repeatCount.map { AnnouncementRepeat(count: $0, gap: repeatGap ?? 1) }
    }

    /// The announcement to make: a `--json` request body decoded as the daemon decodes it
    /// (strict JSON, unknown keys refused with the daemon's message), or `--ssml` or plain
    /// text; the flags given override the body's values. Checked against the limits the
    /// daemon applies by default, so what passes here is not refused there for its size.
    /// `--to` as the request's `output`: one name, or a list (`platform1,platform2`), which is one
    /// announcement heard in all of them at once.
    private var addressed: (output: String?, outputs: [String]?) {
        guard let to, to.contains(",") else { return (to, nil) }
        return (nil, to.split(separator: ",", omittingEmptySubsequences: false).map(String.init))
    }

    func readRequest() throws -> AnnouncementRequest {
        let defaults = try speech.attributes()
        var request: AnnouncementRequest
        if let json {
            let data = try Self.read(json == "-" ? nil : json, what: "--json")
            do {
                request = try AnnouncementRequest.decode(json: data)
            } catch {
                throw SpeakFailure.invalidInput("--json \(json): \(error)")
            }
            request.utterance.defaults = defaults.inheriting(from: request.utterance.defaults)
            if let priorityOption { request.delivery.priority = priorityOption }
            if interrupt { request.delivery.queue = false }
            if let expiresAfter { request.delivery.expiresAfter = expiresAfter }
            if to != nil { (request.output, request.outputs) = addressed }
        } else {
            request = AnnouncementRequest(
                utterance: try plainOrSSMLUtterance(defaults: defaults), priority: priority, queue: !interrupt,
                expiresAfter: expiresAfter)
            (request.output, request.outputs) = addressed
        }
        if let chime { request.delivery.chime = ["none", "off"].contains(chime.lowercased()) ? .none : .named(chime) }
        if let chimeAfter {
            request.delivery.chimeAfter =
                ["none", "off"].contains(chimeAfter.lowercased()) ? .none : .named(chimeAfter)
        }
        if let repetition { request.delivery.repeat = repetition }
        if isPrivate { request.delivery.isPrivate = true }
        do {
            try request.utterance.validate(limits: .default)
        } catch {
            throw SpeakFailure.invalidInput("\(error)")
        }
        return request
    }

    /// TEXT, or standard input without the whitespace and newline at its end (`echo` and
    /// editors end a file with one; the text the events report should not).
    private func plainOrSSMLUtterance(defaults: SpeechAttributes) throws -> Utterance {
        if !clips.isEmpty, text.isEmpty {
            return Utterance(spans: clips.map { Span.clip($0) }, defaults: defaults)
        }
        var utterance = try textUtterance(defaults: defaults)
        // Clips have no text: the boundaries' offsets stay as they are.
        utterance.spans.insert(contentsOf: clips.map { Span.clip($0) }, at: 0)
        return utterance
    }

    private func textUtterance(defaults: SpeechAttributes) throws -> Utterance {
        var source: String
        if text.isEmpty {
            source = String(decoding: try Self.read(nil, what: "standard input"), as: UTF8.self)
            while source.last?.isWhitespace == true { source.removeLast() }
        } else {
            source = text.joined(separator: " ")
        }
        guard !source.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw SpeakFailure.invalidInput("nothing to speak: give TEXT or write it to standard input")
        }
        guard ssml else { return Utterance(source, defaults: defaults) }
        var utterance: Utterance
        do {
            utterance = try Utterance(ssml: source)
        } catch {
            throw SpeakFailure.invalidInput("--ssml: \(error)")
        }
        utterance.defaults = defaults.inheriting(from: utterance.defaults)
        return utterance
    }

    private static func read(_ path: String?, what: String) throws -> Data {
        do {
            if let path { return try Data(contentsOf: URL(fileURLWithPath: path)) }
            return FileHandle.standardInput.readDataToEndOfFile()
        } catch {
            throw SpeakFailure.invalidInput("\(what) \(path ?? "-"): cannot read: \(error.localizedDescription)")
        }
    }
}

extension AnnouncementPriority: ExpressibleByArgument {}
