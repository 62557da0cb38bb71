import EspeakEngine
import SpeechRendering
import WorkerRuntime

extension EspeakInput {
    /// The input as `speakd-engine-worker` reads it from a job frame (`WorkerJob.input`): flags
    /// (bit 0: the text is SSML, bit 1: it switches voices), the rate and the volume (2 bytes
    /// each, little-endian), the base voice's length (2 bytes) and UTF-8 name, then the text in
    /// UTF-8 to the end. The worker hands it to espeak-ng as it is: it parses no JSON and
    /// compiles nothing.
    public var workerInput: [UInt8] {
        let voice = Array(voice.utf8.prefix(Int(UInt16.max)))
        let flags: UInt8 = (isMarkup ? 1 : 0) | (switchesVoice ? 2 : 0)
        return [flags] + WorkerFrame.littleEndian16(UInt16(clamping: rate))
            + WorkerFrame.littleEndian16(UInt16(clamping: volume)) + WorkerFrame.littleEndian16(UInt16(voice.count))
            + voice + Array(text.utf8)
    }

    /// The input `workerInput` wrote.
    public init(workerInput bytes: [UInt8]) throws(WorkerProtocolError) {
        guard bytes.count >= 7 else {
            throw .malformed("an espeak-ng job's input has \(bytes.count) bytes, not 7 or more")
        }
        let flags = bytes[0]
        let voiceLength = Int(WorkerFrame.readLittleEndian(bytes[5..<7]))
        guard bytes.count - 7 >= voiceLength else {
            throw .malformed("a job's voice name runs past the frame")
        }
        self.init(
            voice: String(decoding: bytes[7..<(7 + voiceLength)], as: UTF8.self),
            rate: Int(WorkerFrame.readLittleEndian(bytes[1..<3])),
            volume: Int(WorkerFrame.readLittleEndian(bytes[3..<5])),
            text: String(decoding: bytes[(7 + voiceLength)...], as: UTF8.self), isMarkup: flags & 1 != 0,
            switchesVoice: flags & 2 != 0)
    }
}

extension WorkerJob {
    /// An espeak-ng job: `input` as its worker reads it.
    public init(_ input: EspeakInput, chunking: RenderChunking) {
        self.init(chunking: chunking, input: input.workerInput)
    }
}
