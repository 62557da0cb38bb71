/// One SSIP reply or notification: zero or more `CODE-data` lines and a final `CODE text` line,
/// each ended by CR LF, with speech-dispatcher's codes and texts (its `src/server/msg.h`), since
/// libspeechd and python3-speechd read the code and the data lines only and libspeechd exits on
/// a reply it cannot parse.
struct SSIPReply: Sendable, Hashable {
    /// The three-digit code.
    let code: Int
    /// The data lines, sent as `CODE-line`.
    var data: [String] = []
    /// The text of the final line.
    let text: String

    init(_ code: Int, _ text: String, data: [String] = []) {
        self.code = code
        self.text = text
        self.data = data
    }

    /// The reply on the wire.
    var wire: String {
        var result = ""
        for line in data { result += "\(code)-\(Self.oneLine(line))\r\n" }
        return result + "\(code) \(text)\r\n"
    }

    /// The same reply with a data line saying why, before the final line: the client's library
    /// reads the code, and a person reading the traffic reads the reason.
    func explained(_ reason: String) -> SSIPReply {
        SSIPReply(code, text, data: data + [reason])
    }

    /// `line` with control characters other than tab replaced by spaces, so it cannot end the
    /// reply early. Tabs stay: `LIST SYNTHESIS_VOICES` separates name, language and variant with
    /// them, and libspeechd hands Chromium a voice without a language (which crashes it) when
    /// they are missing.
    private static func oneLine(_ line: String) -> String {
        String(
            String.UnicodeScalarView(
                line.unicodeScalars.map { ($0.value < 0x20 && $0 != "\t") || $0 == "\u{7F}" ? " " : $0 }))
    }

    // MARK: Speech-dispatcher's replies

    static let languageSet = SSIPReply(201, "OK LANGUAGE SET")
    static let prioritySet = SSIPReply(202, "OK PRIORITY SET")
    static let rateSet = SSIPReply(203, "OK RATE SET")
    static let pitchSet = SSIPReply(204, "OK PITCH SET")
    static let punctuationSet = SSIPReply(205, "OK PUNCTUATION SET")
    static let capLetRecognSet = SSIPReply(206, "OK CAP LET RECOGNITION SET")
    static let spellingSet = SSIPReply(207, "OK SPELLING SET")
    static let clientNameSet = SSIPReply(208, "OK CLIENT NAME SET")
    static let voiceSet = SSIPReply(209, "OK VOICE SET")
    static let stopped = SSIPReply(210, "OK STOPPED")
    static let paused = SSIPReply(211, "OK PAUSED")
    static let resumed = SSIPReply(212, "OK RESUMED")
    static let canceled = SSIPReply(213, "OK CANCELED")
    static let outputModuleSet = SSIPReply(216, "OK OUTPUT MODULE SET")
    static let pauseContextSet = SSIPReply(217, "OK PAUSE CONTEXT SET")
    static let volumeSet = SSIPReply(218, "OK VOLUME SET")
    static let ssmlModeSet = SSIPReply(219, "OK SSML MODE SET")
    static let notificationSet = SSIPReply(220, "OK NOTIFICATION SET")
    static func messageQueued(_ id: Int) -> SSIPReply { SSIPReply(225, "OK MESSAGE QUEUED", data: ["\(id)"]) }
    static let messageCanceled = SSIPReply(227, "OK MESSAGE CANCELED")
    static let receivingData = SSIPReply(230, "OK RECEIVING DATA")
    static let bye = SSIPReply(231, "HAPPY HACKING")
    static func clientID(_ id: Int) -> SSIPReply { SSIPReply(245, "OK CLIENT ID SENT", data: ["\(id)"]) }
    static func help(_ lines: [String]) -> SSIPReply { SSIPReply(248, "OK HELP SENT", data: lines) }
    static func voices(_ lines: [String]) -> SSIPReply { SSIPReply(249, "OK VOICE LIST SENT", data: lines) }
    static func modules(_ lines: [String]) -> SSIPReply { SSIPReply(250, "OK MODULE LIST SENT", data: lines) }
    static func got(_ value: String) -> SSIPReply { SSIPReply(251, "OK GET RETURNED", data: [value]) }
    static let insideBlock = SSIPReply(260, "OK INSIDE BLOCK")
    static let outsideBlock = SSIPReply(261, "OK OUTSIDE BLOCK")
    static let pitchRangeSet = SSIPReply(263, "OK PITCH RANGE SET")

    static let internalError = SSIPReply(300, "ERR INTERNAL")
    static let couldNotSetPriority = SSIPReply(301, "ERR COULDNT SET PRIORITY")
    static let couldNotSetLanguage = SSIPReply(302, "ERR COULDNT SET LANGUAGE")
    static let couldNotSetVoice = SSIPReply(309, "ERR COULDNT SET VOICE")
    static let couldNotSetNotification = SSIPReply(316, "ERR COULDNT SET NOTIFICATION")
    static let alreadyInsideBlock = SSIPReply(330, "ERR ALREADY INSIDE BLOCK")
    static let alreadyOutsideBlock = SSIPReply(331, "ERR ALREADY OUTSIDE BLOCK")
    static let notImplemented = SSIPReply(380, "ERR NOT YET IMPLEMENTED")
    static let idDoesNotExist = SSIPReply(406, "ERR ID DOESNT EXIST")
    static let unknownIcon = SSIPReply(407, "ERR UNKNOWN ICON")
    static let unknownPriority = SSIPReply(408, "ERR UNKNOWN PRIORITY")
    static let rateTooHigh = SSIPReply(409, "ERR RATE TOO HIGH")
    static let rateTooLow = SSIPReply(410, "ERR RATE TOO LOW")
    static let pitchTooHigh = SSIPReply(411, "ERR PITCH TOO HIGH")
    static let pitchTooLow = SSIPReply(412, "ERR PITCH TOO LOW")
    // speech-dispatcher's own texts for these two say PITCH; clients read the code.
    static let volumeTooHigh = SSIPReply(413, "ERR PITCH TOO HIGH")
    static let volumeTooLow = SSIPReply(414, "ERR PITCH TOO LOW")
    static let pitchRangeTooHigh = SSIPReply(415, "ERR PITCH RANGE TOO HIGH")
    static let pitchRangeTooLow = SSIPReply(416, "ERR PITCH RANGE TOO LOW")
    static let invalidCommand = SSIPReply(500, "ERR INVALID COMMAND")
    static let invalidEncoding = SSIPReply(501, "ERR INVALID ENCODING")
    static let missingParameter = SSIPReply(510, "ERR MISSING PARAMETER")
    static let notANumber = SSIPReply(511, "ERR PARAMETER NOT A NUMBER")
    static let notOnOff = SSIPReply(513, "ERR PARAMETER NOT ON OR OFF")
    static let parameterInvalid = SSIPReply(514, "ERR PARAMETER INVALID")
}

/// An event notification (700–705), sent only to a client that asked for that kind.
enum SSIPEvent: Sendable, Hashable, CaseIterable {
    case indexMark, begin, end, cancel, pause, resume

    /// The name `SET SELF NOTIFICATION` takes.
    var scope: String {
        switch self {
        case .indexMark: "index_marks"
        case .begin: "begin"
        case .end: "end"
        case .cancel: "cancel"
        case .pause: "pause"
        case .resume: "resume"
        }
    }

    /// The notification of message `message` from client `client`; `mark` for index marks.
    func reply(message: Int, client: Int, mark: String? = nil) -> SSIPReply {
        let ids = ["\(message)", "\(client)"]
        return switch self {
        case .indexMark: SSIPReply(700, "INDEX MARK", data: ids + [mark ?? ""])
        case .begin: SSIPReply(701, "BEGIN", data: ids)
        case .end: SSIPReply(702, "END", data: ids)
        case .cancel: SSIPReply(703, "CANCELED", data: ids)
        case .pause: SSIPReply(704, "PAUSED", data: ids)
        case .resume: SSIPReply(705, "RESUMED", data: ids)
        }
    }
}
