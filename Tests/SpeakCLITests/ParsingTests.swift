import ArgumentParser
import Foundation
import SpeakAPI
import SpeechModel
import Testing

@testable import SpeakCLI

/// Flags are parsed and validated by the parser, and bad values are named in the message.
@Suite struct ParsingTests {
    /// `speak --version` prints the version of debian/changelog's top entry, `-dev` after it in
    /// this debug build, and exits 0, before and after the daemon options.
    @Test(arguments: [["--version"], ["--socket", "/run/speakd/speakd.sock", "--version"]])
    func versionFlag(_ arguments: [String]) throws {
        let changelog = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("debian/changelog")
        let first = try String(contentsOf: changelog, encoding: .utf8).prefix { $0 != "\n" }
        let version = first.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" } + "-dev"
        #expect(version.count > "-dev".count)
        do {
            _ = try Speak.parseAsRoot(arguments)
            Issue.record("--version parsed as a command")
        } catch {
            #expect(Speak.exitCode(for: error) == .success)
            #expect(Speak.fullMessage(for: error) == version)
        }
    }

    @Test func defaultCommandTakesTextAndFlags() throws {
        let command = try Speak.parseAsRoot(["--pitch", "1.4", "--lang", "pt-PT", "--no-punctuation", "Olá", "bom dia"])
        let say = try #require(command as? Speak.Say)
        let utterance = try say.readUtterance()
        #expect(utterance.text == "Olá bom dia")
        #expect(utterance.defaults.pitch == 1.4)
        #expect(utterance.defaults.language?.canonical == "pt-PT")
        #expect(utterance.defaults.punctuation == false)
        #expect(say.announcement.priority == .default)
        #expect(!say.announcement.interrupt)
    }

    @Test func flagsBecomeUtteranceDefaultsAndRequestFields() throws {
        let command = try Speak.parseAsRoot([
            "--punctuation", "--spell-out", "--rate", "1.5", "--volume", "0.5", "--priority", "high",
            "--interrupt", "--wait", "--expires-after", "10", "07402",
        ])
        let say = try #require(command as? Speak.Say)
        let defaults = try say.readUtterance().defaults
        #expect(defaults.punctuation == true)
        #expect(defaults.spellOut == true)
        #expect(defaults.rate == 1.5)
        #expect(defaults.volume == 0.5)
        #expect(say.announcement.priority == .high)
        #expect(say.announcement.interrupt)
        #expect(say.wait)
        #expect(say.announcement.expiresAfter == 10)
    }

    @Test func privateBecomesTheRequestField() throws {
        let say = try #require(try Speak.parseAsRoot(["--private", "Your", "PIN"]) as? Speak.Say)
        let request = try say.readRequest()
        #expect(request.delivery.isPrivate)
        let body = try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any]
        #expect(body?["private"] as? Bool == true)
        let plain = try #require(try Speak.parseAsRoot(["hi"]) as? Speak.Say)
        #expect(try !plain.readRequest().delivery.isPrivate)
        #expect(Speak.Say.helpMessage().contains("--private"))
    }

    @Test func chimeAndRepeatBecomeRequestFields() throws {
        let say = try #require(
            try Speak.parseAsRoot(["--chime", "two-tone", "--repeat", "3", "--repeat-gap", "0.5", "Gate", "B"])
                as? Speak.Say)
        let request = try say.readRequest()
        #expect(request.delivery.chime == .named("two-tone"))
        #expect(request.delivery.repeat == AnnouncementRepeat(count: 3, gap: 0.5))
        let none = try #require(try Speak.parseAsRoot(["--chime", "none", "hi"]) as? Speak.Say)
        #expect(try none.readRequest().delivery.chime == ChimeChoice.none)
        #expect(try none.readRequest().delivery.repeat == nil)
        let body =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(try none.readRequest())) as? [String: Any]
        #expect(body?["chime"] is NSNull)
        #expect(body?["chimeAfter"] == nil)

        let after = try #require(try Speak.parseAsRoot(["--chime-after", "ding", "hi"]) as? Speak.Say)
        #expect(try after.readRequest().delivery.chimeAfter == .named("ding"))
        #expect(try after.readRequest().delivery.chime == .priorityDefault)
        let afterBody =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(try after.readRequest())) as? [String: Any]
        #expect(afterBody?["chimeAfter"] as? String == "ding")
        let decoded = try AnnouncementRequest.decode(json: JSONEncoder().encode(try after.readRequest()))
        #expect(decoded.delivery.chimeAfter == .named("ding"))
    }

    /// `--clip NAME` plays the daemon's clips before the text, in order; alone it plays only them.
    @Test func clipsComeBeforeTheText() throws {
        let say = try #require(
            try Speak.parseAsRoot(["--clip", "next-train", "--clip", "gong", "--lang", "pt-PT", "Lisboa"]) as? Speak.Say
        )
        let request = try say.readRequest()
        #expect(request.utterance.spans.map(\.clip) == ["next-train", "gong", nil])
        #expect(request.utterance.text == "Lisboa")
        #expect(request.utterance.defaults.language?.canonical == "pt-PT")
        let only = try #require(try Speak.parseAsRoot(["--clip", "gong"]) as? Speak.Say)
        #expect(try only.readRequest().utterance.spans == [.clip("gong")])
        let body = try JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any]
        #expect((body?["spans"] as? [[String: Any]])?.first?["clip"] as? String == "next-train")
        expectRefused(["--clip", "../secret", "hi"], naming: "--clip ../secret")
        expectRefused(["--clip", "gong", "--json", "-"], naming: "--json")
    }

    /// `--to NAME` names the daemon's output in the request; `cancel --all --to NAME` cancels only there.
    @Test func toNamesTheOutput() throws {
        let say = try #require(try Speak.parseAsRoot(["--to", "headset", "Your ticket"]) as? Speak.Say)
        #expect(try say.readRequest().output == "headset")
        let plain = try #require(try Speak.parseAsRoot(["Your ticket"]) as? Speak.Say)
        #expect(try plain.readRequest().output == nil)
        let cancel = try #require(try Speak.parseAsRoot(["cancel", "--all", "--to", "headset"]) as? Speak.Cancel)
        #expect(cancel.to == "headset")
    }

    /// `--to platform1,platform2` is one announcement heard in both zones: `output` as a list.
    @Test func toWithACommaNamesSeveralZones() throws {
        let say = try #require(try Speak.parseAsRoot(["--to", "platform1,platform2", "Doors closing"]) as? Speak.Say)
        let request = try say.readRequest()
        #expect(request.output == nil)
        #expect(request.outputs == ["platform1", "platform2"])
    }

    @Test(arguments: [
        (["--pitch", "3", "hi"], "--pitch 3"),
        (["--pitch=-0.5", "hi"], "--pitch -0.5"),
        (["--rate", "0.1", "hi"], "--rate 0.1"),
        (["--volume", "2.5", "hi"], "--volume 2.5"),
        (["--repeat", "11", "hi"], "--repeat: repeat.count must be from 1 to 10, not 11"),
        (["--repeat", "2", "--repeat-gap", "12", "hi"], "repeat.gap must be a number of seconds from 0 to 10"),
        (["--repeat-gap", "1", "hi"], "--repeat-gap needs --repeat N"),
        (["--lang", "en-", "hi"], "--lang en-"),
        (["--lang", "en_GB", "x"], "--lang en_GB"),
        (["--priority", "urgent", "hi"], "urgent"),
        (["--audio", "speakers", "hi"], "--audio speakers"),
        (["--output", "x.mp3", "hi"], "--output x.mp3"),
        (["--expires-after", "0", "hi"], "--expires-after 0"),
        (["--http", "localhost", "hi"], "--http localhost"),
        // The daemon's parser, read as a client: the host and a port from 1 must be given.
        (["--http", ":7770", "hi"], "--http :7770: the host is empty"),
        (["--http", "127.0.0.1:0", "hi"], "--http 127.0.0.1:0: '0' is not a port number 1–65535"),
        (["--http", "::1:7770", "hi"], "--http ::1:7770: write an IPv6 address in brackets"),
        (["--json", "-", "--ssml"], "--json and --ssml"),
        (["cancel"], "missing announcement id"),
        (["cancel", "--all", "abc"], "not both"),
        (["--to", "headset", "--local", "hi"], "--to names one of the daemon's outputs"),
        (["--to", "headset", "--output", "x.wav", "hi"], "--to names one of the daemon's outputs"),
        (["cancel", "--to", "headset", "abc"], "--to goes with --all"),
        // A negative number after an option is its value, so the range error names it.
        (["--pitch", "-1", "hi"], "--pitch -1"),
        (["--rate", "-0.5", "hi"], "--rate -0.5"),
        (["--volume", "-0.5", "hi"], "--volume -0.5"),
        (["--expires-after", "-5", "hi"], "--expires-after -5"),
    ])
    func invalidInputNamesTheFlagAndValue(arguments: [String], expected: String) {
        expectRefused(arguments, naming: expected)
    }

    @Test func invalidInputExitsTwo() async {
        #expect(await Speak.run(arguments: ["--pitch", "3", "hi"]) == 2)
        #expect(await Speak.run(arguments: ["--lang", "en-", "hi"]) == 2)
        #expect(await Speak.run(arguments: ["--no-such-flag"]) == 2)
    }

    @Test func helpListsTheFlagsAndExitsZero() async {
        let help = Speak.helpMessage(for: Speak.Say.self)
        for flag in [
            "--pitch", "--lang", "--punctuation", "--no-punctuation", "--spell-out", "--rate", "--volume",
            "--priority", "--interrupt", "--wait", "--output", "--socket", "--json", "--ssml",
        ] {
            #expect(help.contains(flag), "help lacks \(flag)")
        }
        let root = Speak.helpMessage()
        for subcommand in ["voices", "events", "cancel", "status"] {
            #expect(root.contains(subcommand))
        }
        #expect(await Speak.run(arguments: ["--help"]) == 0)
    }

    @Test func ssmlAndJSONInputsParse() throws {
        let ssml = try #require(
            try Speak.parseAsRoot(["--ssml", "<speak>Platform <say-as interpret-as=\"characters\">7</say-as></speak>"])
                as? Speak.Say)
        let fromSSML = try ssml.readUtterance()
        #expect(fromSSML.spans.contains { $0.attributes.spellOut == true && $0.text == "7" })

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).json")
        try Data(
            #"{"spans":[{"text":"Next train to "},{"text":"Lisboa","language":"pt-PT","pitch":1.2}],"rate":1.1}"#.utf8
        )
        .write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let json = try #require(try Speak.parseAsRoot(["--json", file.path, "--pitch", "0.9"]) as? Speak.Say)
        let fromJSON = try json.readUtterance()
        #expect(fromJSON.spans.count == 2)
        #expect(fromJSON.spans[1].attributes.language?.canonical == "pt-PT")
        #expect(fromJSON.defaults.rate == 1.1)
        #expect(fromJSON.defaults.pitch == 0.9)
    }

    @Test func badJSONNamesTheField() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).json")
        try Data(#"{"spans":[{"text":"a"},{"text":"b","pitch":7}]}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let json = try #require(try Speak.parseAsRoot(["--json", file.path]) as? Speak.Say)
        #expect {
            try json.readUtterance()
        } throws: { error in
            "\(error)".contains("spans[1].pitch")
        }
    }

    /// Connection options may stand before the subcommand: `speak --http H status` shows the
    /// status instead of speaking the word "status".
    @Test func subcommandsAreFoundAfterConnectionOptions() throws {
        let tcp = SpeakEndpoint.tcp(host: "127.0.0.1", port: 7770)
        let status = try #require(try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "status"]) as? Speak.Status)
        #expect(try status.connection.candidates(environment: [:]) == [tcp])

        let cancel = try #require(
            try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "cancel", "abc123"]) as? Speak.Cancel)
        #expect(cancel.id == "abc123" && !cancel.all)
        #expect(try cancel.connection.candidates(environment: [:]) == [tcp])

        let all = try #require(try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "cancel", "--all"]) as? Speak.Cancel)
        #expect(all.all && all.id == nil)
        #expect(try all.connection.candidates(environment: [:]) == [tcp])

        let events = try #require(
            try Speak.parseAsRoot(["--socket", "/tmp/s.sock", "--token-file", "/tmp/t", "events", "--count", "2"])
                as? Speak.Events)
        #expect(events.count == 2)
        #expect(events.connection.tokenFile == "/tmp/t")
        #expect(try events.connection.candidates(environment: [:]) == [.unixSocket(path: "/tmp/s.sock")])

        // After the subcommand, and after the text, as before.
        let after = try #require(try Speak.parseAsRoot(["status", "--socket", "/tmp/s.sock"]) as? Speak.Status)
        #expect(try after.connection.candidates(environment: [:]) == [.unixSocket(path: "/tmp/s.sock")])
        let say = try #require(try Speak.parseAsRoot(["Doors closing", "--http", "127.0.0.1:7770"]) as? Speak.Say)
        #expect(try say.readUtterance().text == "Doors closing")
        #expect(try say.connection.candidates(environment: [:]) == [tcp])

        // The rule that makes this possible still refuses two daemons.
        #expect(throws: (any Error).self) {
            try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "status", "--socket", "/tmp/s.sock"])
        }
    }

    /// A text that is a subcommand's name is spoken with `say` or after `--`.
    @Test(arguments: [
        ["say", "status"], ["--", "status"], ["--http", "127.0.0.1:7770", "say", "status"],
        ["--http", "127.0.0.1:7770", "--", "status"], ["--socket", "/tmp/s.sock", "say", "cancel", "--", "--all"],
    ])
    func aSubcommandNameIsSpokenWithSayOrAfterTwoDashes(arguments: [String]) throws {
        let say = try #require(try Speak.parseAsRoot(arguments) as? Speak.Say, "\(arguments)")
        let expected = arguments.contains("cancel") ? "cancel --all" : "status"
        #expect(try say.readUtterance().text == expected)
    }

    /// `--json` decodes the file as the daemon decodes a request body: an unknown key is refused
    /// with the daemon's message, not dropped.
    @Test func jsonRefusesUnknownKeysAsTheDaemonDoes() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).json")
        try Data(#"{"text":"Doors closing","pich":1.6}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let say = try #require(try Speak.parseAsRoot(["--json", file.path]) as? Speak.Say)
        #expect {
            try say.readUtterance()
        } throws: { error in
            "\(error)".contains("--json \(file.path): pich: unknown key 'pich'; a request has ")
        }
        #expect(await Speak.run(arguments: ["--json", file.path, "--local", "--audio", "null"]) == 2)
    }

    /// The CLI and the daemon allow the same number of spans.
    @Test func spanLimitIsTheDaemons() throws {
        func json(spans count: Int) throws -> URL {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-\(UUID()).json")
            let spans = (0..<count).map { _ in #"{"text":"a "}"# }.joined(separator: ",")
            try Data(#"{"spans":[\#(spans)]}"#.utf8).write(to: file)
            return file
        }
        let fits = try json(spans: 100)
        let over = try json(spans: 101)
        defer {
            try? FileManager.default.removeItem(at: fits)
            try? FileManager.default.removeItem(at: over)
        }
        let accepted = try #require(try Speak.parseAsRoot(["--json", fits.path]) as? Speak.Say)
        #expect(try accepted.readUtterance().spans.count == 100)
        let refused = try #require(try Speak.parseAsRoot(["--json", over.path]) as? Speak.Say)
        #expect {
            try refused.readUtterance()
        } throws: { error in
            "\(error)".contains("spans: 101 spans is more than the limit of 100")
        }
    }

    /// The token goes over TCP only, from --token-file, SPEAKD_TOKEN_FILE, SPEAKD_TOKEN or next to the socket.
    @Test func tokenIsFoundForTCPOnly() throws {
        let token = String(repeating: "ab", count: 32)
        let environment = ["SPEAKD_TOKEN": token, "XDG_RUNTIME_DIR": "/nonexistent"]
        let none = try #require(try Speak.parseAsRoot(["hi"]) as? Speak.Say).connection
        #expect(try none.token(for: .unixSocket(path: "/tmp/s.sock"), environment: environment) == nil)
        #expect(try none.token(for: .tcp(host: "127.0.0.1", port: 7770), environment: environment) == token)
        if !FileManager.default.fileExists(atPath: "/run/speakd/token") {
            #expect(
                try none.token(for: .tcp(host: "127.0.0.1", port: 7770), environment: ["XDG_RUNTIME_DIR": "/none"])
                    == nil)
        }

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("speak-token-\(UUID())")
        try Data("\(token.uppercased())\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let flag = try #require(
            try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "--token-file", file.path, "hi"]) as? Speak.Say
        ).connection
        #expect(
            try flag.token(for: .tcp(host: "127.0.0.1", port: 7770), environment: environment) == token.uppercased())
        let missing = try #require(
            try Speak.parseAsRoot(["--http", "127.0.0.1:7770", "--token-file", "/nonexistent/token", "hi"])
                as? Speak.Say
        ).connection
        #expect {
            try missing.token(for: .tcp(host: "127.0.0.1", port: 7770), environment: environment)
        } throws: { error in
            "\(error)".contains("cannot read the token file /nonexistent/token")
        }
    }

    @Test func daemonEndpointsFollowFlagsThenEnvironmentThenDefaults() throws {
        let none = try #require(try Speak.parseAsRoot(["hi"]) as? Speak.Say).connection
        #expect(
            try none.candidates(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"]) == [
                .unixSocket(path: "/run/user/1000/speakd/speakd.sock"), .unixSocket(path: "/run/speakd/speakd.sock"),
            ])
        #expect(
            try none.candidates(environment: ["SPEAKD_SOCKET": "/tmp/s.sock"]) == [.unixSocket(path: "/tmp/s.sock")])
        #expect(
            try none.candidates(environment: ["SPEAKD_HTTP": "127.0.0.1:7770"]) == [.tcp(host: "127.0.0.1", port: 7770)]
        )
        let flag = try #require(try Speak.parseAsRoot(["--http", "[::1]:8080", "hi"]) as? Speak.Say).connection
        #expect(try flag.candidates(environment: ["SPEAKD_SOCKET": "/tmp/s.sock"]) == [.tcp(host: "::1", port: 8080)])
    }
}
