import Dispatch
import PosixSupport
import SpeakDaemon

/// Reads the configuration and runs the daemon; everything else lives in `SpeakDaemon`.
@main
struct Speakd {
    static func main() {
        // `--print-config-file`, `--print-manual-page`: documents made from the settings.
        if let document = SpeakdCommand.document(for: Array(CommandLine.arguments.dropFirst())) {
            print(document, terminator: "")
            return
        }
        Malloc.limitArenas(to: 1)
        // The daemon runs on Swift's cooperative pool while this thread waits for it. An `async`
        // main would end this thread with `pthread_exit` (libdispatch's `dispatch_main`), and that
        // exit's forced unwind reads about 0.5 MB of the program's unwind tables, which an idle
        // daemon then keeps resident. Nothing in speakd runs on the main actor.
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await SpeakdCommand.main()
            finished.signal()
        }
        finished.wait()
    }
}
