import AudioOutput
import SpeakTestSupport
import SpeechRendering

extension TestSignal {
    /// Writes `chunks` to `sink` until a write fails with an `AudioOutputError`; that error, or
    /// nil when every write succeeded.
    static func firstWriteFailure(_ chunks: [PCMChunk], to sink: some AudioSink) async throws -> AudioOutputError? {
        for chunk in chunks {
            do { try await sink.write(chunk) } catch let error as AudioOutputError { return error }
        }
        return nil
    }
}

/// Runs `body` with a fresh private PulseAudio server, which is stopped (by PID) however
/// `body` ends.
func withPulseServer<T>(_ body: (PulseAudioServer) async throws -> T) async throws -> T {
    let server = try await PulseAudioServer.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}
