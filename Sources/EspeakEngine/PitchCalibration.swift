import Foundation

/// Maps the `pitch` attribute (an F0 multiplier, 1.0 normal) to espeak-ng's pitch parameter (0–100).
///
/// espeak-ng's pitch parameter moves F0 roughly exponentially and is the same scale whether set
/// with `espeak_SetParameter(espeakPITCH)` or with an absolute SSML `<prosody pitch="N">`, so one
/// table serves both. The table holds, for each parameter value, the median F0 of voiced frames
/// relative to the median at 50, measured with `speakd-engine-bench --calibrate-pitch` (a fixed
/// English and Portuguese sentence, each voice, YIN over 25 ms frames; the ratio is the mean over
/// the voices). The inverse is interpolated linearly in log F0 between table rows, so it is
/// strictly increasing; requests outside what the voice reaches are clamped to the ends.
public enum PitchCalibration {
    /// (espeak pitch parameter, F0 relative to parameter 50), increasing in both columns.
    static let table: [(parameter: Double, ratio: Double)] = [
        (0, 0.70), (10, 0.76), (20, 0.82), (30, 0.88), (40, 0.94), (50, 1.00),
        (60, 1.10), (70, 1.21), (80, 1.33), (90, 1.48), (100, 1.66),
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
