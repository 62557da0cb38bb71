import CALSA
import FoundationEssentials
import Logging
import SpeechModel
import SpeechRendering

#if canImport(Glibc)
import Glibc
#endif

/// Plays straight to an ALSA device (`default`, `hw:0,0`, `plughw:1`, …), for kiosks without a
/// sound server.
///
/// The device is opened non-blocking: writes wait for room with `poll` (through `snd_pcm_wait`)
/// and a time limit, so a wedged device fails the call instead of holding the thread forever.
public final class ALSASink: DeviceBackedSink {
    /// The ALSA device name.
    public let device: String

    /// - Parameters:
    ///   - device: the ALSA PCM name.
    ///   - format: the sample format of every chunk written.
    ///   - configuration: ALSA configuration text added to the system's before `device` is
    ///     looked up, to define a PCM without editing asound.conf
    ///     (`pcm.kiosk { type pulse server "unix:/run/kiosk/pulse/native" }`).
    ///   - options: latency and time limits.
    ///   - logger: where failures and recoveries are reported.
    public init(
        device: String = "default", format: AudioFormat, configuration: String? = nil,
        options: AudioSinkOptions = AudioSinkOptions(),
        logger: Logger = Logger(label: "speakd.audio")
    ) {
        self.device = device
        ALSAErrorLog.route(to: logger)
        let name = "alsa:\(device)"
        let core = DeviceSink(name: name, format: format, options: options, logger: logger) {
            () throws(AudioOutputError) in
            try ALSADevice(
                sinkName: name, device: device, format: format, configuration: configuration, options: options)
        }
        super.init(core: core, reports: .position)
    }
}

/// One open ALSA playback PCM, in non-blocking mode.
final class ALSADevice: BlockingAudioDevice {
    private let pcm: OpaquePointer
    /// The configuration the PCM was opened from, when it was given its own; kept until close.
    private let configuration: OpaquePointer?
    private let sinkName: String
    private let bytesPerFrame: Int
    private let sampleRate: Int
    /// How long one wait for room or for the drain may take; past it the device is wedged.
    private let waitLimit: Duration

    init(
        sinkName: String, device: String, format: AudioFormat, configuration text: String?,
        options: AudioSinkOptions
    ) throws(AudioOutputError) {
        self.sinkName = sinkName
        self.bytesPerFrame = format.bytesPerFrame
        self.sampleRate = format.sampleRate
        // Shorter than the sink's own limit, so the device's answer arrives before the watchdog's.
        self.waitLimit = options.callTimeout * 3 / 4
        let configuration = try text.map { (text) throws(AudioOutputError) in
            try Self.configuration(adding: text, sinkName: sinkName)
        }
        var handle: OpaquePointer?
        var status =
            if let configuration {
                snd_pcm_open_lconf(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK, configuration)
            } else {
                snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
            }
        guard status >= 0, let handle else {
            if let configuration { snd_config_delete(configuration) }
            throw .openFailed(sink: sinkName, "\(device): \(Self.message(status))")
        }
        self.configuration = configuration
        status = snd_pcm_set_params(
            handle, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, UInt32(format.channels),
            UInt32(format.sampleRate), 1, UInt32(clamping: options.targetLatency.microseconds))
        guard status >= 0 else {
            snd_pcm_close(handle)
            if let configuration { snd_config_delete(configuration) }
            throw .unsupportedFormat(sink: sinkName, "\(device) cannot play \(format): \(Self.message(status))")
        }
        self.pcm = handle
    }

    /// The PCM's delay: frames written and not yet heard, as ALSA counts them.
    func queuedDuration() -> Duration? {
        var frames: snd_pcm_sframes_t = 0
        guard snd_pcm_delay(pcm, &frames) == 0, frames >= 0 else { return nil }
        return .microseconds(Int64(frames) * 1_000_000 / Int64(sampleRate))
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
                    throw .timedOut(sink: sinkName, operation: "write (waiting for room)", limit: waitLimit)
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
        if let configuration { snd_config_delete(configuration) }
    }

    /// A copy of the system's ALSA configuration with `text` loaded on top.
    private static func configuration(adding text: String, sinkName: String) throws(AudioOutputError) -> OpaquePointer {
        var system: OpaquePointer?
        var status = snd_config_update_ref(&system)
        guard status >= 0, let system else {
            throw .openFailed(sink: sinkName, "cannot read the ALSA configuration: \(message(status))")
        }
        defer { snd_config_unref(system) }
        var copy: OpaquePointer?
        status = snd_config_copy(&copy, system)
        guard status >= 0, let copy else {
            throw .openFailed(sink: sinkName, "cannot copy the ALSA configuration: \(message(status))")
        }
        var input: OpaquePointer?
        status = text.withCString { snd_input_buffer_open(&input, $0, -1) }
        if status >= 0, let input {
            status = snd_config_load(copy, input)
            snd_input_close(input)
        }
        guard status >= 0 else {
            snd_config_delete(copy)
            throw .openFailed(sink: sinkName, "bad ALSA configuration: \(message(status))")
        }
        return copy
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
