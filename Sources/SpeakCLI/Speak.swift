import ArgumentParser
import Foundation
import SpeakdVersion

/// `speak`: post an announcement to the daemon, or speak it in-process when none runs.
public struct Speak: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "speak",
        abstract: "Speak text through speakd, or in-process when no daemon is running.",
        discussion: """
            Exit status: 0 when the speech succeeded (with --wait: was spoken to the end), \
            1 when it did not, 2 for invalid input.

            A first word that names a subcommand runs it, after any daemon options; to speak \
            such a word, write 'speak say status' or 'speak -- status'.

            \(Say.examples)
            """,
        version: SpeakdVersion.current,
        subcommands: [
            Say.self, Voices.self, Events.self, Cancel.self, Pause.self, Resume.self, Status.self, Session.self,
            Again.self, Schedule.self, Audit.self,
        ],
        defaultSubcommand: Say.self
    )

    /// The daemon to talk to, parsed here at the root wherever it stands on the command line, so
    /// `speak --http HOST:PORT status` runs `status` instead of speaking the word. Each
    /// subcommand's own `@OptionGroup` of the same type receives this value (argument-parser
    /// hands a parent's decoded group down) and shows the options in its help.
    @OptionGroup(title: "Daemon options") var connection: ConnectionOptions

    public init() {}

    /// Parses `arguments`, runs the command and returns the exit status; messages go to standard error.
    public static func run(arguments: [String]) async -> Int32 {
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return 0
        } catch let failure as SpeakFailure {
            printError("speak: \(failure.message)")
            return failure.exitStatus
        } catch {
            let status = exitCode(for: error)
            if status == .success {
                let message = fullMessage(for: error)
                print(message == helpMessage() ? topLevelHelp() : message)
                return 0
            }
            printError(fullMessage(for: error))
            // Usage and validation errors are invalid input: exit 2, as the contract says.
            return status == .validationFailure ? 2 : status.rawValue
        }
    }
}

extension Speak {
    /// The help of `speak --help`, `speak -h` and `speak help`: the default command's arguments
    /// and options (what most runs use), then the subcommands.
    ///
    /// argument-parser's own help for a command with subcommands lists only the subcommands and
    /// the root's options, leaving the speech flags to `speak help say`.
    static func topLevelHelp(columns: Int? = nil) -> String {
        let root = helpMessage(columns: columns)
        let say = helpMessage(for: Say.self, columns: columns)
        guard let usage = root.range(of: "\nUSAGE:"), let subcommands = root.range(of: "\nSUBCOMMANDS:"),
            let arguments = say.range(of: "\nARGUMENTS:")
        else { return root }
        var sayOptions = say[arguments.lowerBound...]
        while sayOptions.last?.isNewline == true { sayOptions.removeLast() }
        return root[..<usage.lowerBound]
            + "\nUSAGE: speak [<options>] [<text> ...]\n       speak [<daemon options>] <subcommand> [<options>]\n"
            + sayOptions + "\n" + root[subcommands.lowerBound...]
    }
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}
