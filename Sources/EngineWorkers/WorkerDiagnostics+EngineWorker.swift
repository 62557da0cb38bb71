import Logging
import WorkerRuntime

extension WorkerDiagnostics {
    /// An espeak-ng worker's or template's: its own messages (`speakd-engine-worker: …` and its
    /// logger's lines) at warning, what libespeak-ng itself prints at debug. The worker links
    /// libespeak-ng without its audio library (`CNoAudioDevice`), so no sound-server client runs
    /// inside the sandbox.
    package static func engineWorker(logger: Logger) -> WorkerDiagnostics {
        WorkerDiagnostics(logger: logger, label: "engine worker") {
            $0.contains("speakd-engine-worker") || $0.contains("speakd.engine-worker")
        }
    }
}
