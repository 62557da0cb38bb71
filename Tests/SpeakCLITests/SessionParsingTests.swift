import SpeakAPI
import Testing

@testable import SpeakCLI

/// `speak session start|set|end` and `speak again`, through the parser.
struct SessionParsingTests {
    @Test func sessionFlagsBecomeTheSessionBody() throws {
        let start = try #require(
            try Speak.parseAsRoot([
                "session", "start", "--to", "hall", "--rate", "0.7", "--volume", "1.5", "--lang", "pt-PT",
                "--voice", "anna", "--move-to", "headset", "--idle-timeout", "60",
            ]) as? Speak.Session)
        let body = try start.request()
        #expect(body.output == "hall" && body.replace)
        #expect(body.rate == .some(0.7) && body.volume == .some(1.5) && body.idleTimeout == .some(60))
        #expect(
            body.language??.description == "pt-PT" && body.voice == .some("anna") && body.moveTo == .some("headset"))

        let privately = try #require(
            try Speak.parseAsRoot(["session", "set", "--move-to", "headset", "--private"]) as? Speak.Session)
        #expect(try privately.request().isPrivate == .some(true))
        let publicly = try #require(try Speak.parseAsRoot(["session", "set", "--no-private"]) as? Speak.Session)
        #expect(try publicly.request().isPrivate == .some(false))
        #expect(throws: (any Error).self) { try Speak.parseAsRoot(["session", "end", "--private"]) }
        let set = try #require(try Speak.parseAsRoot(["session", "set", "--rate", "0.5"]) as? Speak.Session)
        let change = try set.request()
        #expect(!change.replace && change.output == nil && change.volume == nil, "set changes only what it names")

        let again = try #require(try Speak.parseAsRoot(["again", "--to", "headset", "--count", "2"]) as? Speak.Again)
        #expect(again.to == "headset" && again.count == 2)
    }

    @Test(arguments: [
        (["session", "start", "--rate", "3"], "--rate: "),
        (["session", "set", "--volume", "-1"], "--volume: "),
        (["session", "set", "--idle-timeout", "0"], "--idle-timeout: "),
        (["session", "set", "--lang", "en_GB"], "--lang: "),
        (["session", "end", "--rate", "1"], "--rate goes with start or set"),
        (["session", "stop"], "stop"),
        (["again", "--count", "17"], "--count 17: must be 1 to 16"),
    ])
    func invalidSessionInputNamesTheFlag(arguments: [String], expected: String) {
        expectRefused(arguments, naming: expected)
    }

    @Test func helpListsSessionAndAgain() {
        let root = Speak.helpMessage()
        #expect(root.contains("session") && root.contains("again"))
        let help = Speak.helpMessage(for: Speak.Session.self)
        for flag in ["--to", "--rate", "--volume", "--lang", "--voice", "--move-to", "--idle-timeout"] {
            #expect(help.contains(flag), "help lacks \(flag)")
        }
    }
}
