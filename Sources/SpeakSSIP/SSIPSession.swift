import FoundationEssentials
import Logging
import SpeakAPI
import SpeakService
import SpeechModel

/// One SSIP connection's settings and commands: it reads lines, answers each command with one
/// reply, and turns `SPEAK`, `CHAR` and `KEY` into announcements through the service.
final class SSIPSession {
    /// The client's settings, as `SET SELF` leaves them; each message takes them as they are
    /// when it is sent.
    struct Settings: Sendable, Hashable {
        var clientName = "unknown:unknown:unknown"
        var language: String?
        /// SSIP's −100…100.
        var rate = 0
        var pitch = 0
        var volume = 0
        var pitchRange = 0
        var punctuation = "none"
        var spelling = false
        var ssml = false
        /// speech-dispatcher's default (`DefaultPriority` unset): `message`, which queues.
        var priority = "message"
        var capitalLetters = "none"
        var voiceType = "MALE1"
        var synthesisVoice: String?
        var outputModule = SSIPSession.moduleName
        var notifications: Set<SSIPEvent> = []
    }

    /// The one output module speakd lists: speakd itself.
    static let moduleName = "speakd"
    /// SSIP's symbolic voice types, which speakd accepts and ignores.
    static let voiceTypes = ["MALE1", "MALE2", "MALE3", "FEMALE1", "FEMALE2", "FEMALE3", "CHILD_MALE", "CHILD_FEMALE"]

    let client: Int
    private(set) var settings = Settings()
    private let service: any SpeakService
    private let hub: SSIPHub
    private let outbox: SSIPOutbox
    private let logger: Logger
    /// The most bytes of one message's text.
    private let maxDataBytes: Int
    /// Inside `SPEAK`: the text so far; nil in command mode.
    private var data: [UInt8]?
    /// Inside `SPEAK`: the text grew past `maxDataBytes` and is dropped up to its end.
    private var dataTooLarge = false
    private var insideBlock = false

    init(
        client: Int, service: any SpeakService, hub: SSIPHub, outbox: SSIPOutbox, maxDataBytes: Int,
        logger: Logger
    ) {
        self.client = client
        self.service = service
        self.hub = hub
        self.outbox = outbox
        self.maxDataBytes = maxDataBytes
        self.logger = logger
    }

    /// Whether the next line is a line of `SPEAK`'s text rather than a command.
    var isReceivingText: Bool { data != nil }

    /// What to do after a line.
    enum Outcome: Equatable {
        /// Nothing to answer (a line of SPEAK's text).
        case nothing
        case reply(SSIPReply)
        /// Answer, then close the connection (`QUIT`).
        case replyAndClose(SSIPReply)
    }

    /// Handles one line: a command, or a line of `SPEAK`'s text.
    func handle(_ line: SSIPLineReader.Line) async -> Outcome {
        if data != nil { return await dataLine(line) }
        guard case .line(let bytes) = line else {
            return .reply(SSIPReply.invalidCommand.explained("the command line is too long"))
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return .reply(.invalidEncoding)
        }
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let command = words.first?.lowercased() else {
            return .reply(SSIPReply.invalidCommand.explained("an empty line is not a command"))
        }
        switch command {
        case "speak":
            data = []
            dataTooLarge = false
            return .reply(.receivingData)
        case "char", "key": return .reply(await event(command, text: text))
        case "sound_icon": return .reply(await soundIcon(words))
        case "set": return .reply(await set(words, line: text))
        case "get": return .reply(get(words))
        case "list": return .reply(await list(words))
        case "history": return .reply(history(words))
        case "stop", "cancel", "pause", "resume": return .reply(await control(command, words))
        case "block": return .reply(block(words))
        case "help": return .reply(.help(Self.helpLines))
        case "quit", "bye": return .replyAndClose(.bye)
        default:
            return .reply(SSIPReply.invalidCommand.explained("unknown command '\(words[0])'"))
        }
    }

    // MARK: SPEAK

    private func dataLine(_ line: SSIPLineReader.Line) async -> Outcome {
        guard case .line(let bytes) = line else {
            dataTooLarge = true
            return .nothing
        }
        if bytes == [UInt8(ascii: ".")] {
            let text = data ?? []
            data = nil
            return .reply(await speakData(text))
        }
        guard !dataTooLarge else { return .nothing }
        // Dot-unstuffing: a line that starts with a dot was sent with one more.
        let unstuffed = bytes.first == UInt8(ascii: ".") ? bytes.dropFirst() : bytes[...]
        var text = data ?? []
        if !text.isEmpty { text.append(UInt8(ascii: "\n")) }
        text.append(contentsOf: unstuffed)
        if text.count > maxDataBytes {
            dataTooLarge = true
            data = []
            return .nothing
        }
        data = text
        return .nothing
    }

    private func speakData(_ bytes: [UInt8]) async -> SSIPReply {
        if dataTooLarge {
            dataTooLarge = false
            return SSIPReply.parameterInvalid.explained(
                "text: the message is longer than the limit of \(maxDataBytes) bytes")
        }
        guard !bytes.isEmpty else { return .messageCanceled }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .invalidEncoding }
        return await submit(text: text, ssml: settings.ssml, spellOut: settings.spelling)
    }

    /// `CHAR c` spells out one character (as speech-dispatcher's does: a longer argument is
    /// refused, not read); `KEY name` says the key's name (`ctrl_a`: "ctrl a").
    private func event(_ command: String, text line: String) async -> SSIPReply {
        let argument = line.drop { $0 != " " }.dropFirst()
        guard !argument.isEmpty else { return .missingParameter }
        let spoken: String
        if argument == "space" {
            spoken = "space"
        } else if command == "key" {
            spoken = String(argument.map { $0 == "_" ? " " : $0 })
        } else {
            guard argument.count == 1 else {
                return SSIPReply.parameterInvalid.explained(
                    "CHAR takes one character (or 'space'), not \(argument.count)")
            }
            spoken = String(argument)
        }
        return await submit(text: spoken, ssml: false, spellOut: command == "char" && spoken.count == 1)
    }

    private func submit(text: String, ssml: Bool, spellOut: Bool, icon: String? = nil) async -> SSIPReply {
        var message: SSIPRequest
        do {
            message = try self.message(text: text, ssml: ssml, spellOut: spellOut, icon: icon)
        } catch {
            return SSIPReply.parameterInvalid.explained(SpeakError.invalid(error).description)
        }
        message.origin = AnnouncementOrigin(
            front: "ssip", detail: "client=\(settings.clientName) connection=\(client)")
        let (number, body) = await hub.register(
            client: client, notify: settings.notifications, outbox: outbox, body: message, priority: settings.priority)
        do {
            // An assistive client's messages take places of their own share of the queue, and
            // wait behind the platform's live announcements of their priority (docs/ssip.md).
            let accepted = try await service.accept(body.request, origin: body.origin)
            await hub.accepted(number, id: accepted.id)
            logger.debug(
                "SSIP message queued",
                metadata: ["speakd.ssip.client": "\(client)", "announcement.id": "\(accepted.id)"])
            return .messageQueued(number)
        } catch {
            await hub.refused(number)
            logger.info(
                "SSIP message refused", metadata: ["speakd.ssip.client": "\(client)", "speakd.error": "\(error)"])
            let reply: SSIPReply =
                switch error.code {
                case .queueFull, .audioUnavailable, .shuttingDown: .internalError
                default: .parameterInvalid
                }
            return reply.explained(error.description)
        }
    }

    /// The request for one message with the client's settings, built as the intake takes it.
    /// - Throws: `SpeechInputError` for an SSML document outside speakd's subset.
    private func message(text: String, ssml: Bool, spellOut: Bool, icon: String?) throws(SpeechInputError)
        -> SSIPRequest
    {
        // SET LANGUAGE keeps only a tag that parses; one that did not would be refused, not dropped.
        let language = try settings.language.map { (tag) throws(SpeechInputError) in
            try LanguageTag(tag, field: "language")
        }
        let defaults = SpeechAttributes(
            pitch: settings.pitch == 0 ? nil : SSIPMapping.pitch(settings.pitch),
            rate: settings.rate == 0 ? nil : SSIPMapping.rate(settings.rate),
            volume: settings.volume == 0 ? nil : SSIPMapping.volume(settings.volume),
            punctuation: icon == nil ? SSIPMapping.punctuation(settings.punctuation) : false,
            language: language, spellOut: spellOut ? true : nil)
        var utterance: Utterance
        if ssml {
            let trimmed = text.trimmingWhitespace()
            utterance = try Utterance(ssml: trimmed.hasPrefix("<speak") ? trimmed : "<speak>\(text)</speak>")
            // The document's own language beats the client's setting.
            let documentLanguage = utterance.defaults.language
            utterance.defaults = defaults
            if let documentLanguage { utterance.defaults.language = documentLanguage }
        } else {
            utterance = Utterance(text, defaults: defaults)
        }
        var request = AnnouncementRequest(
            utterance: utterance, priority: SSIPMapping.priority(settings.priority),
            // A sound icon is its chime alone: no chime after it, whatever the priority's default.
            chime: icon.map { .named($0) } ?? .priorityDefault, chimeAfter: icon == nil ? .priorityDefault : .none)
        request.delivery.replaceGroup = SSIPMapping.replaceGroup(settings.priority)
        request.delivery.dropIfBusy = SSIPMapping.dropIfBusy(settings.priority)
        request.delivery.replaces = SSIPMapping.replaces(settings.priority)
        return SSIPRequest(request: request, isPlainText: !ssml && !spellOut && icon == nil)
    }

    // MARK: SET, GET, LIST

    private func set(_ words: [String], line: String) async -> SSIPReply {
        guard words.count >= 3 else { return .missingParameter }
        let who = words[1].lowercased()
        guard who == "self" else {
            return who == "all" || Int(who) != nil
                ? SSIPReply.parameterInvalid.explained("speakd sets a client's own settings only: SET SELF")
                : .parameterInvalid
        }
        let name = words[2].lowercased()
        if name == "notification" {
            guard words.count >= 5 else { return .missingParameter }
            guard let on = Self.onOff(words[4]) else { return .parameterInvalid }
            let scope = words[3].lowercased()
            let events: [SSIPEvent] =
                scope == "all" ? SSIPEvent.allCases : SSIPEvent.allCases.filter { $0.scope == scope }
            guard !events.isEmpty else { return .couldNotSetNotification }
            for event in events {
                if on { settings.notifications.insert(event) } else { settings.notifications.remove(event) }
            }
            return .notificationSet
        }
        if name == "synthesis_voice" {
            // The voice's name may have spaces: everything after the third word.
            let voice = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
            guard voice.count == 4 else { return .missingParameter }
            let name = String(voice[3])
            settings.synthesisVoice = name
            // A voice of `LIST SYNTHESIS_VOICES` (a browser's chosen voice) picks its language,
            // which picks the voice; another name is kept and changes nothing.
            let voices = (try? await service.voices()) ?? []
            if let language = voices.first(where: { $0.name == name })?.languages.first {
                settings.language = language
            }
            return .voiceSet
        }
        let value = words[3...].first ?? ""
        guard !value.isEmpty else { return .missingParameter }
        switch name {
        case "client_name":
            settings.clientName = value
            return .clientNameSet
        case "priority":
            guard SSIPMapping.priorities.contains(value.lowercased()) else { return .unknownPriority }
            settings.priority = value.lowercased()
            return .prioritySet
        case "language":
            guard let tag = try? LanguageTag(value) else {
                return SSIPReply.couldNotSetLanguage.explained("language: '\(value)' is not a BCP 47 language tag")
            }
            settings.language = tag.canonical
            return .languageSet
        case "rate":
            return number(value, low: .rateTooLow, high: .rateTooHigh) { settings.rate = $0 } ?? .rateSet
        case "pitch":
            return number(value, low: .pitchTooLow, high: .pitchTooHigh) { settings.pitch = $0 } ?? .pitchSet
        case "volume":
            return number(value, low: .volumeTooLow, high: .volumeTooHigh) { settings.volume = $0 } ?? .volumeSet
        case "pitch_range":
            return number(value, low: .pitchRangeTooLow, high: .pitchRangeTooHigh) { settings.pitchRange = $0 }
                ?? .pitchRangeSet
        case "punctuation":
            guard ["all", "most", "some", "none"].contains(value.lowercased()) else { return .parameterInvalid }
            settings.punctuation = value.lowercased()
            return .punctuationSet
        case "cap_let_recogn":
            guard ["none", "spell", "icon"].contains(value.lowercased()) else { return .parameterInvalid }
            settings.capitalLetters = value.lowercased()
            return .capLetRecognSet
        case "spelling", "ssml_mode":
            guard let on = Self.onOff(value) else { return .notOnOff }
            if name == "spelling" { settings.spelling = on } else { settings.ssml = on }
            return name == "spelling" ? .spellingSet : .ssmlModeSet
        case "voice_type":
            guard Self.voiceTypes.contains(value.uppercased()) else { return .couldNotSetVoice }
            settings.voiceType = value.uppercased()
            return .voiceSet
        case "output_module":
            settings.outputModule = value
            return .outputModuleSet
        case "pause_context":
            guard Int(value) != nil else { return .notANumber }
            return .pauseContextSet
        default:
            return SSIPReply.invalidCommand.explained("unknown setting '\(words[2])'")
        }
    }

    /// Stores a number of −100…100, or returns the reply that refuses it.
    private func number(
        _ value: String, low: SSIPReply, high: SSIPReply, store: (Int) -> Void
    ) -> SSIPReply? {
        guard let number = Int(value) else { return .notANumber }
        if number < -100 { return low }
        if number > 100 { return high }
        store(number)
        return nil
    }

    private static func onOff(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "on": true
        case "off": false
        default: nil
        }
    }

    private func get(_ words: [String]) -> SSIPReply {
        guard words.count >= 2 else { return .missingParameter }
        switch words[1].lowercased() {
        case "output_module": return .got(settings.outputModule)
        case "language": return .got(settings.language ?? "en")
        case "rate": return .got("\(settings.rate)")
        case "pitch": return .got("\(settings.pitch)")
        case "volume": return .got("\(settings.volume)")
        case "pitch_range": return .got("\(settings.pitchRange)")
        case "punctuation": return .got(settings.punctuation)
        case "voice_type": return .got(settings.voiceType)
        default: return .parameterInvalid
        }
    }

    private func list(_ words: [String]) async -> SSIPReply {
        guard words.count >= 2 else { return .missingParameter }
        switch words[1].lowercased() {
        case "voices":
            return .voices(Self.voiceTypes)
        case "output_modules":
            return .modules([Self.moduleName])
        case "synthesis_voices":
            let voices = (try? await service.voices()) ?? []
            let language = words.count > 2 ? words[2].lowercased() : nil
            let lines = voices.compactMap { voice -> String? in
                let tag = voice.languages.first ?? "none"
                if let language, language != "none", !tag.lowercased().hasPrefix(language) { return nil }
                return "\(voice.name)\t\(tag)\t\(voice.variant ?? "none")"
            }
            return .voices(lines)
        default:
            return .parameterInvalid
        }
    }

    private func history(_ words: [String]) -> SSIPReply {
        guard words.count >= 3 else { return .missingParameter }
        if words[1].lowercased() == "get", words[2].lowercased() == "client_id" {
            return .clientID(client)
        }
        return .notImplemented
    }

    private func block(_ words: [String]) -> SSIPReply {
        guard words.count >= 2 else { return .missingParameter }
        switch words[1].lowercased() {
        case "begin":
            guard !insideBlock else { return .alreadyInsideBlock }
            insideBlock = true
            return .insideBlock
        case "end":
            guard insideBlock else { return .alreadyOutsideBlock }
            insideBlock = false
            return .outsideBlock
        default:
            return .parameterInvalid
        }
    }

    /// `SOUND_ICON name`: the chime of that name (`GET /v1/chimes`), queued as a message of the
    /// client's priority, with its notifications; an icon no chime is named after is refused
    /// with `407`.
    ///
    /// An announcement needs text: the chime is carried by a silent one, ".", without
    /// punctuation, whose render is 56 ms of engine silence that playback trims, so the chime is
    /// all that is heard.
    private func soundIcon(_ words: [String]) async -> SSIPReply {
        guard words.count >= 2 else { return .missingParameter }
        let name = words[1]
        guard let chime = service.limits.chimes.first(where: { $0.lowercased() == name.lowercased() }) else {
            let known = service.limits.chimes.isEmpty ? "none" : service.limits.chimes.joined(separator: ", ")
            return SSIPReply.unknownIcon.explained("icon: no chime is named '\(name)' (speakd's chimes: \(known))")
        }
        return await submit(text: Self.iconText, ssml: false, spellOut: false, icon: chime)
    }

    /// The silent text that carries a sound icon's chime.
    static let iconText = "."

    // MARK: STOP, CANCEL, PAUSE, RESUME

    /// `self`, `all` (every SSIP client's messages; never speakd's other announcements) or a
    /// client id, as speech-dispatcher takes them.
    private func control(_ command: String, _ words: [String]) async -> SSIPReply {
        guard words.count >= 2 else { return .missingParameter }
        let target: Int?
        switch words[1].lowercased() {
        case "self": target = client
        case "all": target = nil
        default:
            guard let number = Int(words[1]) else { return .parameterInvalid }
            guard number > 0 else { return .idDoesNotExist }
            target = number
        }
        // Each through the intake, as HTTP's are; a message that ended meanwhile is not an error here.
        for id in await hub.announcements(of: target) {
            let state = await service.status(id: id, key: nil)?.state
            switch command {
            case "cancel":
                _ = try? await service.cancel(id: id)
            case "stop" where state == .speaking || state == .paused:
                _ = try? await service.cancel(id: id)
            case "pause" where state == .speaking:
                _ = try? await service.pause(id: id, output: nil, atWordEnd: false)
            case "resume" where state == .paused:
                _ = try? await service.resume(id: id, output: nil)
            default:
                break
            }
        }
        switch command {
        case "cancel": return .canceled
        case "stop": return .stopped
        case "pause": return .paused
        default: return .resumed
        }
    }

    private static let helpLines = [
        "  SPEAK           -- say text ",
        "  KEY             -- say a combination of keys ",
        "  CHAR            -- say a character ",
        "  SOUND_ICON      -- execute a sound icon ",
        "  SET             -- set a parameter ",
        "  GET             -- get a current parameter ",
        "  LIST            -- list available arguments ",
        "  HISTORY         -- commands related to history ",
        "  QUIT            -- close the connection ",
    ]
}

/// A message as `POST /v1/announcements` takes it, so the intake checks it as it checks every
/// other front's.
struct SSIPRequest: Sendable {
    /// The announcement, before any session changed it.
    var request: AnnouncementRequest
    /// Plain text: not SSML, not spelt out, not a sound icon, so an interrupted message can go
    /// on from the word heard last.
    var isPlainText: Bool
    /// The client and connection that sent it.
    var origin: AnnouncementOrigin = .local
}
