import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Maps the `pitch` attribute (an F0 multiplier, 1.0 normal) to espeak-ng's pitch parameter (0–100).
///
/// espeak-ng's pitch parameter moves F0 roughly exponentially and is the same scale whether set
/// with `espeak_SetParameter(espeakPITCH)` or with an absolute SSML `<prosody pitch="N">`, so one
/// table serves both. The table holds, for each parameter value, the median F0 of voiced frames
/// relative to the median at 50, measured with `speakd-engine-bench --calibrate-pitch`: one fixed
/// sentence per voice, rendered by libespeak-ng at parameters 0, 5, …, 100; median F0 of voiced
/// frames (YIN over 25 ms frames, `AudioAnalysis`); the ratio to parameter 50, averaged over the
/// voices. The inverse is interpolated linearly in log F0 between table rows, so it is strictly
/// increasing; requests outside what the voice reaches are clamped to the ends. espeak-ng takes
/// whole numbers, so the parameter is rounded (one step is about 1% of F0).
///
/// SSML's relative form is no F0 percentage in espeak-ng 1.51: `<prosody pitch="+40%">` sets the
/// parameter to 50 × 1.4 = 70, which measures ×1.22, not ×1.4. That is why the engine writes
/// absolute parameter values taken from this table.
public enum PitchCalibration {
    // (espeak pitch parameter, F0 relative to parameter 50), increasing in both columns.
    // Measured 2026-11-21 with espeak-ng 1.51 (voices gmw/en, gmw/en-US, roa/pt, roa/es; per-voice
    // ratios stay within ±3% of the mean). Re-run the calibration after an espeak-ng upgrade.
    static let table: [(parameter: Double, ratio: Double)] = [
        (0, 0.669), (5, 0.687), (10, 0.718), (15, 0.744), (20, 0.771), (25, 0.805), (30, 0.831),
        (35, 0.866), (40, 0.916), (45, 0.962), (50, 1.000), (55, 1.049), (60, 1.103), (65, 1.160),
        (70, 1.220), (75, 1.285), (80, 1.355), (85, 1.429), (90, 1.504), (95, 1.592), (100, 1.664),
    ]

    /// The lowest F0 multiplier espeak-ng reaches.
    public static var minimum: Double { table.first!.ratio }
    /// The highest F0 multiplier espeak-ng reaches.
    public static var maximum: Double { table.last!.ratio }

    /// The espeak pitch parameter (0–100) whose F0 is `multiplier ×` that at 1.0, clamped.
    public static func espeakPitch(for multiplier: Double) -> Int {
        Int(parameter(for: multiplier).rounded())
    }

    /// The unrounded parameter for `multiplier`: strictly increasing between the ends of the table.
    public static func parameter(for multiplier: Double) -> Double {
        guard multiplier.isFinite, multiplier > minimum else { return table.first!.parameter }
        guard multiplier < maximum else { return table.last!.parameter }
        let target = log(multiplier)
        for (lower, upper) in zip(table, table.dropFirst()) where multiplier <= upper.ratio {
            let fraction = (target - log(lower.ratio)) / (log(upper.ratio) - log(lower.ratio))
            return lower.parameter + fraction * (upper.parameter - lower.parameter)
        }
        return table.last!.parameter
    }
}
