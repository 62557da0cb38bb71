import Foundation
import Logging
import SpeakCLI

// The CLI's output is its result; the engine's info logs are for the daemon's journal.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel =
        ProcessInfo.processInfo.environment["SPEAK_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
    return handler
}
exit(await Speak.run(arguments: Array(CommandLine.arguments.dropFirst())))
