import PosixSupport
import SpeakDaemon

/// Reads the configuration and runs the daemon; everything else lives in `SpeakDaemon`.
@main
struct Speakd {
    static func main() async {
        // `--print-config-file`, `--print-manual-page`: documents made from the settings.
        if let document = SpeakdCommand.document(for: Array(CommandLine.arguments.dropFirst())) {
            print(document, terminator: "")
            return
        }
        Malloc.limitArenas(to: 1)
        await SpeakdCommand.main()
    }
}
