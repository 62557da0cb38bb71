import SpeakAPI
import SpeechModel
import Testing

@testable import SpeakSSIP

@Suite struct SSIPLineReaderTests {
    @Test func splitsLinesEndedByCRLFOrLFAcrossReads() {
        var reader = SSIPLineReader(maxLine: 64)
        #expect(reader.read(Array("SET SELF RA".utf8)).isEmpty)
        #expect(
            reader.read(Array("TE 10\r\nQUIT\n\r\n".utf8)) == [
                .line(Array("SET SELF RATE 10".utf8)), .line(Array("QUIT".utf8)), .line([]),
            ])
    }

    @Test func dropsAnOverlongLineOnceAndReadsTheNext() {
        var reader = SSIPLineReader(maxLine: 8)
        let lines = reader.read(Array(String(repeating: "x", count: 100).utf8))
        #expect(lines == [.tooLong])
        // The rest of the long line is dropped; the line after it is read whole.
        #expect(reader.read(Array("yyyy\r\nHELP\r\n".utf8)) == [.line(Array("HELP".utf8))])
    }

    @Test func theLimitMayChangeBetweenLines() {
        var reader = SSIPLineReader(maxLine: 8)
        var bytes = Array(("SPEAK\r\n" + String(repeating: "x", count: 100) + "\r\n.\r\nQUIT").utf8)[...]
        #expect(reader.next(from: &bytes) == .line(Array("SPEAK".utf8)))
        // Inside SPEAK a line of text may be as long as the message.
        reader.maxLine = 200
        #expect(reader.next(from: &bytes) == .line(Array(repeating: UInt8(ascii: "x"), count: 100)))
        reader.maxLine = 8
        #expect(reader.next(from: &bytes) == .line(Array(".".utf8)))
        #expect(reader.next(from: &bytes) == nil, "QUIT has no line end yet")
        var end = Array("\n".utf8)[...]
        #expect(reader.next(from: &end) == .line(Array("QUIT".utf8)))
    }

    @Test func noLogShowsWhatIsToBeSpoken() {
        func logged(_ line: String, isText: Bool = false) -> String {
            SSIPLineReader.Line.line(Array(line.utf8)).logged(isText: isText)
        }
        #expect(logged("Your PIN is 4711", isText: true) == "(16 bytes of message text)")
        #expect(logged("CHAR 4") == "CHAR (argument not shown)")
        #expect(logged("key ctrl_a") == "key (argument not shown)")
        #expect(logged("SET SELF RATE 10") == "SET SELF RATE 10")
        #expect(SSIPLineReader.Line.tooLong.logged(isText: true) == "(a line over the limit)")
    }

    @Test func keepsALineOfExactlyTheLimit() {
        var reader = SSIPLineReader(maxLine: 4)
        #expect(reader.read(Array("ABCD\r\n".utf8)) == [.line(Array("ABCD".utf8))])
    }
}

@Suite struct SSIPReplyTests {
    @Test func multiLineRepliesHaveDataLinesThenTheFinalLine() {
        #expect(SSIPReply.messageQueued(12).wire == "225-12\r\n225 OK MESSAGE QUEUED\r\n")
        #expect(SSIPReply.clientID(3).wire == "245-3\r\n245 OK CLIENT ID SENT\r\n")
        #expect(SSIPReply.invalidCommand.wire == "500 ERR INVALID COMMAND\r\n")
    }

    @Test func anExplanationCannotEndTheReplyEarly() {
        let reply = SSIPReply.parameterInvalid.explained("text:\r\n200 OK fake")
        #expect(reply.wire == "514-text:  200 OK fake\r\n514 ERR PARAMETER INVALID\r\n")
    }

    @Test func voiceListLinesKeepTheirTabs() {
        #expect(SSIPReply.voices(["English\ten\tnone"]).wire == "249-English\ten\tnone\r\n249 OK VOICE LIST SENT\r\n")
    }

    @Test func notificationsCarryMessageAndClientIDs() {
        #expect(SSIPEvent.begin.reply(message: 7, client: 2).wire == "701-7\r\n701-2\r\n701 BEGIN\r\n")
        #expect(SSIPEvent.end.reply(message: 7, client: 2).wire == "702-7\r\n702-2\r\n702 END\r\n")
        #expect(SSIPEvent.cancel.reply(message: 7, client: 2).wire == "703-7\r\n703-2\r\n703 CANCELED\r\n")
        #expect(
            SSIPEvent.indexMark.reply(message: 7, client: 2, mark: "w3").wire
                == "700-7\r\n700-2\r\n700-w3\r\n700 INDEX MARK\r\n")
    }
}

@Suite struct SSIPMappingTests {
    @Test(arguments: [(-100, 0.5), (0, 1.0), (100, 2.0), (50, 1.414_213_56)])
    func rateAndPitchAreOctavesEitherSide(ssip: Int, speakd: Double) {
        #expect(abs(SSIPMapping.rate(ssip) - speakd) < 1e-6)
        #expect(abs(SSIPMapping.pitch(ssip) - speakd) < 1e-6)
    }

    @Test(arguments: [(-100, 0.0), (0, 1.0), (100, 2.0), (-50, 0.5)])
    func volumeIsLinearFromSilentToTwice(ssip: Int, speakd: Double) {
        #expect(abs(SSIPMapping.volume(ssip) - speakd) < 1e-9)
    }

    @Test func onlyImportantMayWaitAheadOfSpeakdsLowAnnouncements() {
        #expect(SSIPMapping.priority("important") == .default)
        for name in ["message", "text", "notification", "progress"] {
            #expect(SSIPMapping.priority(name) == .low)
        }
    }

    /// speech-dispatcher's `resolve_priorities`: text replaces text; message cancels text;
    /// all but notification cancel notification; nothing else cancels progress.
    @Test func priorityRulesAreSpeechDispatchers() {
        #expect(SSIPMapping.replaceGroup("text") == "ssip-text")
        #expect(SSIPMapping.replaceGroup("message") == nil)
        #expect(SSIPMapping.replaceGroup("important") == nil)
        #expect(SSIPMapping.replaces("message") == ["ssip-text", "ssip-notification"])
        for name in ["important", "text", "progress"] {
            #expect(SSIPMapping.replaces(name) == ["ssip-notification"])
        }
        #expect(SSIPMapping.replaces("notification").isEmpty)
        for name in SSIPMapping.priorities {
            #expect(!SSIPMapping.replaces(name).contains("ssip-progress"))
            #expect(SSIPMapping.stops("important", speaking: name) == !["important", "progress"].contains(name))
            #expect(!SSIPMapping.stops("message", speaking: name))
        }
        #expect(SSIPSession.Settings().priority == "message")
    }

    /// An interrupted message resumes from the word heard last; all again when there is no
    /// plain text or nothing to say is left.
    @Test func anInterruptedMessageResumesFromTheWordHeardLast() {
        var body = SSIPRequest(
            request: AnnouncementRequest(utterance: Utterance("Café au lait, then the next train.")), isPlainText: true)
        #expect(SSIPHub.rest(of: body, from: 14) == "then the next train.")
        #expect(SSIPHub.rest(of: body, from: 0) == nil)
        #expect(SSIPHub.rest(of: body, from: 33) == nil, "only the full stop is left")
        #expect(SSIPHub.rest(of: body, from: 400) == nil)
        // SSML, spelt out or a sound icon: all of it again.
        body.isPlainText = false
        #expect(SSIPHub.rest(of: body, from: 14) == nil)
    }
}

@Suite struct SSIPOutboxTests {
    /// Everything the outbox has to write so far, after closing it.
    private func written(_ outbox: SSIPOutbox) async -> [String] {
        outbox.close()
        var result: [String] = []
        for await text in outbox.stream { result.append(text) }
        return result
    }

    @Test func holdsNotificationsUntilTheCommandsReply() async {
        let outbox = SSIPOutbox(limit: 1 << 16)
        outbox.beginCommand()
        outbox.notify(SSIPEvent.begin.reply(message: 1, client: 1))
        outbox.reply(.messageQueued(2))
        outbox.notify(SSIPEvent.end.reply(message: 1, client: 1))
        #expect(
            await written(outbox) == [
                "225-2\r\n225 OK MESSAGE QUEUED\r\n", "701-1\r\n701-1\r\n701 BEGIN\r\n",
                "702-1\r\n702-1\r\n702 END\r\n",
            ])
    }

    @Test func aClientThatDoesNotReadIsCutOffAtTheLimit() async {
        let outbox = SSIPOutbox(limit: 100)
        for message in 1...20 { outbox.notify(SSIPEvent.end.reply(message: message, client: 1)) }
        let texts = await written(outbox)
        #expect(texts.count < 20)
        #expect(texts.reduce(0) { $0 + $1.utf8.count } <= 100)
    }
}
