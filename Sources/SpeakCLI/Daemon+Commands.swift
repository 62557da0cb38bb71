import ArgumentParser
import Foundation
import SpeakAPI
import SpeakClient

extension Speak {
    /// `speak events`: follow the daemon's event stream.
    struct Events: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print the daemon's events (queued, started, paused, resumed, finished, session, repeat) as JSON lines."
        )

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Option(help: "Resume after this event id (replays what the daemon still remembers).")
        var after: String?

        @Option(help: "Stop after this many events.")
        var count: Int?

        @Flag(help: "Also print word, sentence and mark events as each is heard.")
        var progress = false

        @Option(help: ArgumentHelp("Only the events of this named output's announcements.", valueName: "name"))
        var to: String?

        func validate() throws {
            if let count, count < 1 { throw ValidationError("--count \(count): must be at least 1") }
        }

        func run() async throws {
            let client = try await connection.requireDaemon()
            var seen = 0
            var query = progress ? [] : ["progress=false"]
            if let to { query.append("output=\(Cancel.escapePath(to))") }
            let path = query.isEmpty ? "/v1/events" : "/v1/events?" + query.joined(separator: "&")
            for try await message in client.events(path, lastEventID: after) {
                FileHandle.standardOutput.write(Data((message.data + "\n").utf8))
                seen += 1
                if let count, seen >= count { break }
            }
        }
    }

    /// `speak cancel ID|--all`.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel one announcement, or all of them.")

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Flag(help: "Cancel every announcement, speaking and waiting.")
        var all = false

        @Option(help: ArgumentHelp("With --all: cancel only those of this named output.", valueName: "name"))
        var to: String?

        @Argument(help: "The announcement's id.")
        var id: String?

        func validate() throws {
            switch (all, id) {
            case (true, .some): throw ValidationError("give an id or --all, not both")
            case (false, .none): throw ValidationError("missing announcement id (or --all)")
            default: break
            }
            if to != nil, !all { throw ValidationError("--to goes with --all; an id names one announcement anywhere") }
        }

        func run() async throws {
            let client = try await connection.requireDaemon()
            let everything = "/v1/announcements" + (to.map { "?output=\(Self.escapePath($0))" } ?? "")
            let path = all ? everything : "/v1/announcements/\(Self.escapePath(id ?? ""))"
            try await client.send("DELETE", path).printBody(orFailWith: "cancel")
        }

        static func escapePath(_ id: String) -> String {
            id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? id
        }
    }

    /// `speak pause [ID]`: silences the speaking announcement, keeping the rest for `speak resume`.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pause the speaking announcement; 'speak resume' continues where it stopped.")

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Flag(help: "Pause at the end of the current word rather than at once.")
        var word = false

        @Option(help: ArgumentHelp("Without an id: the speaking one of this named output.", valueName: "name"))
        var to: String?

        @Argument(help: "The announcement's id; the speaking one when left out.")
        var id: String?

        func run() async throws {
            try await Speak.control("pause", id: id, to: to, query: word ? ["at=word"] : [], connection: connection)
        }
    }

    /// `speak resume [ID]`: continues a paused announcement from where it stopped.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume the paused announcement.")

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Option(help: ArgumentHelp("Without an id: the paused one of this named output.", valueName: "name"))
        var to: String?

        @Argument(help: "The announcement's id; the paused speaking one when left out.")
        var id: String?

        func run() async throws {
            try await Speak.control("resume", id: id, to: to, connection: connection)
        }
    }

    /// `speak pause` and `speak resume`: `POST /v1/announcements/ID/ACTION` for an id, else
    /// `POST /v1/ACTION`, for the output `to` names when it names one; `query` adds the action's own.
    static func control(
        _ action: String, id: String?, to: String?, query: [String] = [], connection: ConnectionOptions
    ) async throws {
        if to != nil, id != nil {
            throw ValidationError("--to goes without an id; an id names one announcement anywhere")
        }
        let client = try await connection.requireDaemon()
        let base = id.map { "/v1/announcements/\(Cancel.escapePath($0))/\(action)" } ?? "/v1/\(action)"
        var query = query
        if let to { query.append("output=\(Cancel.escapePath(to))") }
        let path = query.isEmpty ? base : base + "?" + query.joined(separator: "&")
        try await client.send("POST", path).printBody(orFailWith: action)
    }

    /// `speak status`: the daemon's health and queue.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the daemon's health and its queue.")

        @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

        @Option(help: ArgumentHelp("Only this named output's queue.", valueName: "name"))
        var to: String?

        func run() async throws {
            let client = try await connection.requireDaemon()
            print("daemon: \(client.endpoint)")
            let health = try await client.send("GET", "/healthz")
            print("health: \(String(decoding: health.body, as: UTF8.self))")
            let path = to.map { "/v1/announcements?output=\(Cancel.escapePath($0))" } ?? "/v1/announcements"
            try await client.send("GET", path).printBody(orFailWith: "status")
        }
    }
}

extension SpeakHTTPResponse {
    /// Prints the body; a non-2xx status becomes a failure carrying the daemon's error message.
    func printBody(orFailWith action: String) throws {
        try checkStatus(action)
        print(String(decoding: body, as: UTF8.self))
    }

    /// A non-2xx status as a failure: invalid input (exit 2) for 400, 413 and 422, else exit 1.
    func checkStatus(_ action: String) throws {
        guard !(200..<300).contains(status) else { return }
        let message = "\(action): \(error?.description ?? "the daemon answered \(status)")"
        throw [400, 413, 422].contains(status)
            ? SpeakFailure.invalidInput(message) : SpeakFailure.notCompleted(message)
    }
}
