import CEspeakNG
import Foundation

/// What one raw synthesis produced, filled in by `rawSynthCallback` on the espeak thread.
final class RawRun {
    var start: UInt64 = 0
    var firstChunk: UInt64?
    var samples: [Int16] = []
    var keepSamples = false
    var sampleCount = 0
}

/// The synth callback for raw libespeak-ng runs: records the first chunk's time and the samples.
func rawSynthCallback(
    _ samples: UnsafeMutablePointer<CShort>?, _ count: CInt, _ events: UnsafeMutablePointer<espeak_EVENT>?
) -> CInt {
    guard let events, let userData = events.pointee.user_data else { return 0 }
    let run = Unmanaged<RawRun>.fromOpaque(userData).takeUnretainedValue()
    if let samples, count > 0 {
        if run.firstChunk == nil { run.firstChunk = Clock.monotonicNanoseconds() }
        run.sampleCount += Int(count)
        if run.keepSamples { run.samples += UnsafeBufferPointer(start: samples, count: Int(count)) }
    }
    return 0
}

/// libespeak-ng called directly, the way a program without speakd would: synchronous mode,
/// plain UTF-8 text, voice and parameters set once. Only call on the espeak thread
/// (inside `EspeakEngine.runExclusively`).
enum RawEspeak {
    static func prepare(voice: String, pitch: Int = 50, rate: Int = 175) {
        espeak_SetSynthCallback(rawSynthCallback)
        _ = espeak_ng_SetVoiceByName(voice)
        _ = espeak_ng_SetParameter(espeakRATE, CInt(rate), 0)
        _ = espeak_ng_SetParameter(espeakVOLUME, 100, 0)
        _ = espeak_ng_SetParameter(espeakPITCH, CInt(pitch), 0)
        _ = espeak_ng_SetParameter(espeakRANGE, 50, 0)
    }

    static func setVoice(_ voice: String) {
        _ = espeak_ng_SetVoiceByName(voice)
    }

    static func synthesize(_ text: String, keepSamples: Bool = false, ssml: Bool = false) -> RawRun {
        let run = RawRun()
        run.keepSamples = keepSamples
        let unmanaged = Unmanaged.passRetained(run)
        defer { unmanaged.release() }
        run.start = Clock.monotonicNanoseconds()
        text.withCString { pointer in
            _ = espeak_ng_Synthesize(
                pointer, strlen(pointer) + 1, 0, POS_CHARACTER, 0,
                UInt32(espeakCHARS_UTF8) | UInt32(espeakENDPAUSE)
                    | (ssml ? UInt32(espeakSSML) | UInt32(espeakPHONEMES) : 0),
                nil, unmanaged.toOpaque())
        }
        return run
    }
}

enum Clock {
    static func monotonicNanoseconds() -> UInt64 { nanoseconds(CLOCK_MONOTONIC) }
    /// CPU time of every thread in the process.
    static func processCPUNanoseconds() -> UInt64 { nanoseconds(CLOCK_PROCESS_CPUTIME_ID) }

    private static func nanoseconds(_ clock: clockid_t) -> UInt64 {
        var time = timespec()
        clock_gettime(clock, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
