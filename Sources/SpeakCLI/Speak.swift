import ArgumentParser

/// `speak`: post an announcement to the daemon, or speak it in-process when none runs.
public struct Speak: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "speak",
        abstract: "Speak text through speakd, or in-process when no daemon is running."
    )

    public init() {}

    public func run() async throws {}
}
