import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient
import SpeechModel

extension Speak {
    /// `speak session start|set|end`: the preferences of the person at the terminal.
    struct Session: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start, change or end the session of an output: the listener's rate, volume, language, voice.",
            discussion: """
                start ends the output's session (if any) and begins a new one; set changes it \
                (starting one when there is none); end ends it. A session ends by itself after \
                --idle-timeout seconds without an announcement (default 120). See docs/session.md.
                """)

        enum Action: String, ExpressibleByArgument, CaseIterable {
            case start, set, end
        }

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Argument(help: "start, set or end.")
        var action: Action

        @Option(help: ArgumentHelp("The output whose session it is (default: the default output).", valueName: "name"))
        var to: String?

        @Option(parsing: .unconditional, help: "Multiplies every announcement's rate, 0.5–2.0.")
        var rate: Double?

        @Option(parsing: .unconditional, help: "Multiplies every announcement's volume, 0.0–2.0.")
        var volume: Double?

        @Option(help: ArgumentHelp("A BCP 47 tag for announcements that name no language.", valueName: "tag"))
        var lang: String?

        @Option(help: ArgumentHelp("A voice for spans that name neither a voice nor a language.", valueName: "name"))
        var voice: String?

        @Option(help: ArgumentHelp("Move the output's announcements to this output.", valueName: "name"))
        var moveTo: String?

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("Seconds without activity before it ends, 1–3600.", valueName: "seconds"))
        var idleTimeout: Double?

        @Flag(
            inversion: .prefixedNo,
            help:
                "Make every announcement private while the headphones are in (the output it is heard on must be private)."
        )
        var `private`: Bool?

        /// The `PUT /v1/session` body of `start` or `set`, checked as the daemon checks it.
        func request() throws -> SessionRequest {
            var request = SessionRequest(output: to, replace: action == .start)
            if let rate { request.rate = .some(rate) }
            if let volume { request.volume = .some(volume) }
            if let voice { request.voice = .some(voice) }
            if let moveTo { request.moveTo = .some(moveTo) }
            if let idleTimeout { request.idleTimeout = .some(idleTimeout) }
            if let `private` { request.isPrivate = .some(`private`) }
            do throws(SpeechInputError) {
                if let lang { request.language = .some(try LanguageTag(lang, field: "language")) }
                try request.validate()
            } catch {
                let flag = Self.flags[error.field ?? ""] ?? error.field ?? "session"
                throw ValidationError("--\(flag): \(error.message)")
            }
            return request
        }

        private static let flags = [
            "rate": "rate", "volume": "volume", "language": "lang", "voice": "voice", "moveTo": "move-to",
            "idleTimeout": "idle-timeout", "output": "to",
        ]

        func validate() throws {
            if action == .end {
                let given = [
                    ("rate", rate != nil), ("volume", volume != nil), ("lang", lang != nil), ("voice", voice != nil),
                    ("move-to", moveTo != nil), ("idle-timeout", idleTimeout != nil), ("private", `private` != nil),
                ]
                if let (flag, _) = given.first(where: \.1) {
                    throw ValidationError("--\(flag) goes with start or set; end takes only --to")
                }
                return
            }
            _ = try request()
        }

        func run() async throws {
            let client = try await connection.requireDaemon()
            switch action {
            case .end:
                let path = "/v1/session?output=\(Cancel.escapePath(to ?? "default"))"
                try await client.send("DELETE", path).printBody(orFailWith: "session end")
            case .start, .set:
                try await client.send("PUT", "/v1/session", json: try request())
                    .printBody(orFailWith: "session \(action.rawValue)")
            }
        }
    }

    /// `speak again`: say the last announcement of an output again.
    struct Again: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Say the last announcement heard on an output again, at its session's rate and volume now.")

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Option(help: ArgumentHelp("The output (default: the default output).", valueName: "name"))
        var to: String?

        @Option(help: "How many of the last ones, 1–16, oldest first.")
        var count: Int = 1

        func validate() throws {
            guard (1...16).contains(count) else { throw ValidationError("--count \(count): must be 1 to 16") }
        }

        func run() async throws {
            let client = try await connection.requireDaemon()
            var path = "/v1/repeat?output=\(Cancel.escapePath(to ?? "default"))"
            if count != 1 { path += "&count=\(count)" }
            try await client.send("POST", path).printBody(orFailWith: "again")
        }
    }
}
