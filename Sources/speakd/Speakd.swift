import PosixSupport
import SpeakDaemon

/// Reads the configuration and runs the daemon; everything else lives in `SpeakDaemon`.
@main
struct Speakd {
    static func main() async {
        Malloc.limitArenas(to: 1)
        await SpeakdCommand.main()
    }
}
