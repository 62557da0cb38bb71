import CALSA
import Foundation
import SpeechModel

/// Plays straight to an ALSA device (`default`, `hw:0,0`, `plughw:1`, …), for kiosks without a
/// sound server.
///
/// The device is opened non-blocking: writes wait for room with `poll` (through `snd_pcm_wait`)
/// and a time limit, so a wedged device fails the call instead of holding the thread forever.
public final class ALSASink: ReopenableAudioSink {
    public let format: AudioFormat
    /// The ALSA device name.
    public let device: String
    private let core: DeviceSink

    public var name: String { core.name }

    /// - Parameters:
    ///   - device: the ALSA PCM name.
    ///   - format: the sample format of every chunk written.
    ///   - options: latency and time limits.
    public init(device: String = "default", format: AudioFormat, options: AudioSinkOptions = AudioSinkOptions()) {
        self.device = device
        self.format = format
        let name = "alsa:\(device)"
        self.core = DeviceSink(name: name, format: format, options: options) { () throws(AudioOutputError) in
            try ALSADevice(sinkName: name, device: device, format: format, options: options)
        }
    }

    public var isAvailable: Bool { core.isAvailable }
    public func write(_ chunk: PCMChunk) async throws { try await core.write(chunk) }
    public func drain() async throws { try await core.drain() }
    public func flush() async throws { try await core.flush() }
    public func reopen() async throws { try await core.reopen() }
    public func close() async { await core.close() }
}

/// One open ALSA playback PCM, in non-blocking mode.
final class ALSADevice: BlockingAudioDevice {
    private let pcm: OpaquePointer
    private let sinkName: String
    private let bytesPerFrame: Int
    /// How long one wait for room or for the drain may take; past it the device is wedged.
    private let waitLimit: Duration

    init(sinkName: String, device: String, format: AudioFormat, options: AudioSinkOptions) throws(AudioOutputError) {
        self.sinkName = sinkName
        self.bytesPerFrame = format.bytesPerFrame
        self.waitLimit = options.callTimeout
        var handle: OpaquePointer?
        var status = snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
        guard status >= 0, let handle else {
            throw .openFailed(sink: sinkName, "\(device): \(Self.message(status))")
        }
        status = snd_pcm_set_params(
            handle, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, UInt32(format.channels),
            UInt32(format.sampleRate), 1, UInt32(clamping: options.targetLatency.microseconds))
        guard status >= 0 else {
            snd_pcm_close(handle)
            throw .unsupportedFormat(sink: sinkName, "\(device) cannot play \(format): \(Self.message(status))")
        }
        self.pcm = handle
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(AudioOutputError) {
        guard let base = bytes.baseAddress else { return }
        let frames = bytes.count / bytesPerFrame
        var done = 0
        while done < frames {
            let count = snd_pcm_writei(pcm, base + done * bytesPerFrame, snd_pcm_uframes_t(frames - done))
            if count >= 0 {
                done += count
                continue
            }
            if count == -Int(EAGAIN) {
                let ready = snd_pcm_wait(pcm, Int32(clamping: waitLimit.microseconds / 1000))
                if ready == 0 {
                    throw .writeFailed(sink: sinkName, "the device took no audio for \(waitLimit)")
                }
                if ready < 0 { try recover(from: ready) }
                continue
            }
            try recover(from: Int32(count))
        }
    }

    func drain(until interrupted: () -> Bool) throws(AudioOutputError) {
        // Non-blocking drain only starts it; wait for the state to leave DRAINING in short steps
        // so a flush can cut it off.
        let status = snd_pcm_drain(pcm)
        if status < 0 && status != -EAGAIN {
            throw .drainFailed(sink: sinkName, Self.message(status))
        }
        let deadline = ContinuousClock.now + waitLimit
        while snd_pcm_state(pcm) == SND_PCM_STATE_DRAINING {
            if interrupted() {
                snd_pcm_drop(pcm)
                break
            }
            if ContinuousClock.now > deadline {
                throw .drainFailed(sink: sinkName, "still draining after \(waitLimit)")
            }
            usleep(2_000)
        }
        let prepared = snd_pcm_prepare(pcm)
        if prepared < 0 { throw .drainFailed(sink: sinkName, Self.message(prepared)) }
    }

    func flush() throws(AudioOutputError) {
        var status = snd_pcm_drop(pcm)
        if status >= 0 { status = snd_pcm_prepare(pcm) }
        if status < 0 { throw .flushFailed(sink: sinkName, Self.message(status)) }
    }

    func close() {
        snd_pcm_close(pcm)
    }

    /// Recovers from an underrun or a suspend; other errors are fatal for this handle.
    private func recover(from status: Int32) throws(AudioOutputError) {
        let recovered = snd_pcm_recover(pcm, status, 1)
        if recovered < 0 { throw .writeFailed(sink: sinkName, Self.message(status)) }
    }

    private static func message(_ status: Int32) -> String {
        snd_strerror(status).map { String(cString: $0) } ?? "ALSA error \(status)"
    }
}
