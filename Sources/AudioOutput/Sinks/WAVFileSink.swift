import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Writes audio to a RIFF/WAVE file (PCM s16le), for `--output FILE.wav` and for checking output
/// by ear or with `sox`.
///
/// The file is created (truncated) on the first write. Its header sizes are patched on every
/// drain and on close, so the file is valid whenever no write is under way. Writes after `close()`
/// append to the same file. Flush has nothing to discard: written audio is already in the file.
public final class WAVFileSink: DeviceBackedSink {
    public let path: String

    /// - Parameters:
    ///   - path: the file to write.
    ///   - format: the sample format of every chunk written.
    ///   - options: time limits (a file on a stuck network mount blocks too).
    ///   - logger: where failures and recoveries are reported.
    public init(
        path: String, format: AudioFormat, options: AudioSinkOptions = AudioSinkOptions(),
        logger: Logger = Logger(label: "speakd.audio")
    ) {
        self.path = path
        let name = "wav:\(path)"
        let written = WAVFileDevice.Progress()
        // Files take whole chunks: there is no playback to interrupt between pieces.
        let core = DeviceSink(name: name, format: format, options: options, piece: .seconds(3600), logger: logger) {
            () throws(AudioOutputError) in
            try WAVFileDevice(sinkName: name, path: path, format: format, progress: written)
        }
        // A file has no playback to report a position of.
        super.init(core: core, reports: [])
    }
}

/// An open WAV file being written.
final class WAVFileDevice: BlockingAudioDevice {
    /// Data bytes already in the file, kept across reopenings so they append.
    final class Progress: Sendable {
        let dataBytes = Mutex<Int?>(nil)
    }

    static let headerSize = WAVHeader.size

    private let descriptor: Int32
    private let sinkName: String
    private let format: AudioFormat
    private let progress: Progress
    private var dataBytes: Int

    init(sinkName: String, path: String, format: AudioFormat, progress: Progress) throws(AudioOutputError) {
        self.sinkName = sinkName
        self.format = format
        self.progress = progress
        let existing = progress.dataBytes.withLock { $0 }
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (existing == nil ? O_TRUNC : 0)
        let descriptor = Glibc.open(path, flags, 0o644)
        guard descriptor >= 0 else {
            throw .openFailed(sink: sinkName, "\(path): \(String(cString: strerror(errno)))")
        }
        self.descriptor = descriptor
        self.dataBytes = existing ?? 0
        if lseek(descriptor, off_t(Self.headerSize + dataBytes), SEEK_SET) < 0 {
            let message = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw .openFailed(sink: sinkName, "\(path): \(message)")
        }
        do {
            try patchHeader()
        } catch {
            Glibc.close(descriptor)
            throw .openFailed(sink: sinkName, error.message)
        }
        progress.dataBytes.withLock { $0 = dataBytes }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        guard dataBytes + bytes.count <= Int(UInt32.max) - Self.headerSize else {
            throw .writeFailed(sink: sinkName, "a WAV file holds at most 4 GiB")
        }
        try writeAll(bytes, at: nil)
        dataBytes += bytes.count
        progress.dataBytes.withLock { $0 = dataBytes }
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        try patchHeader()
    }

    func flush() throws(AudioOutputError) {}

    func close() {
        try? patchHeader()
        Glibc.close(descriptor)
    }

    private func patchHeader() throws(AudioOutputError) {
        let header = WAVHeader.encode(dataBytes: dataBytes, format: format)
        var failure: AudioOutputError?
        header.withUnsafeBytes { bytes in
            do throws(AudioOutputError) { try writeAll(bytes, at: 0) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes all of `bytes` at `offset`, or at the current position when nil.
    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int?) throws(AudioOutputError) {
        var done = 0
        while done < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[done...])
            let count =
                offset.map { pwrite(descriptor, rest.baseAddress, rest.count, off_t($0 + done)) }
                ?? Glibc.write(descriptor, rest.baseAddress, rest.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .writeFailed(sink: sinkName, String(cString: strerror(errno)))
            }
            done += count
        }
    }
}
