import SpeechModel
import SpeechRendering

/// libespeak-ng driven from the calling thread, for a process that owns one libespeak-ng and
/// does nothing else with it: the engine worker, which reads a job, renders it and reads the
/// next, all on its main thread.
///
/// It starts no thread (`EspeakEngine` hands its work to one of its own), so the process stays
/// single-threaded. Not thread-safe, and never to be used in a process that also has an
/// `EspeakEngine`: libespeak-ng's state is process-global.
public final class EspeakDirectSession {
    private let session = EspeakSession()
    private let configuration: EspeakEngine.Configuration
    /// s16 mono at espeak-ng's sample rate (22050 Hz for its own voices).
    public let format: AudioFormat

    /// Initialises libespeak-ng with `configuration`'s data directory (or the library's default)
    /// and loads its synthesis data.
    ///
    /// - Throws: `EspeakError` when the data is missing or unreadable.
    public init(configuration: EspeakEngine.Configuration) throws(EspeakError) {
        self.configuration = configuration
        let path = configuration.dataPath ?? session.defaultDataPath()
        try session.prepare(dataPath: path, bufferMilliseconds: configuration.bufferMilliseconds)
        format = AudioFormat(sampleRate: session.sampleRate)
    }

    /// Loads `voice` (`gmw/en-US+speakd-kiosk`, as compiled input names it) now, so that a job on
    /// that voice finds it loaded: in a worker template, the voice's dictionary is then read once
    /// and shared by every worker forked afterwards.
    ///
    /// - Throws: `EspeakError` when espeak-ng has no such voice.
    public func loadVoice(_ voice: String) throws(EspeakError) {
        try session.setVoice(voice)
    }

    /// Renders `input` (an `EspeakEngine`'s compiled input) before returning, chunked as
    /// `EspeakEngine.render` chunks it: each chunk goes to `deliver` as it is made.
    ///
    /// - Parameters:
    ///   - input: the compiled input to render.
    ///   - chunking: how the samples are grouped into chunks.
    ///   - cancelRequested: asked at each of espeak-ng's blocks (about every 50 ms of audio); true
    ///     aborts the synthesis there.
    ///   - deliver: receives each chunk as it is made.
    /// - Returns: false when the rendering was aborted, true when it ran to its end.
    /// - Throws: `EspeakError` when espeak-ng refuses the voice, a parameter or the input.
    public func render(
        _ input: EspeakInput, chunking: RenderChunking,
        deliver: @escaping @Sendable (PCMChunk) -> Void, cancelRequested: @escaping @Sendable () -> Bool
    ) throws(EspeakError) -> Bool {
        let context = RenderContext(
            format: format, configuration: configuration, chunking: chunking, cancelRequested: cancelRequested,
            sink: deliver)
        return try session.render(input, context: context)
    }
}
