/// Parses the `--audio` value. The audio output module owns the sinks; this only checks the
/// grammar `auto|pulse|alsa[:DEVICE]|wav:PATH|null` so configuration errors surface at start.
enum AudioSinkFactory {
    struct SpecError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ value: String) throws(SpecError) -> String {
        let keyword = value.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        let argument = value.firstIndex(of: ":").map { value[value.index(after: $0)...] }
        switch (keyword, argument) {
        case ("auto", nil), ("pulse", nil), ("null", nil), ("alsa", nil): return value
        case ("alsa", let device?) where !device.isEmpty: return value
        case ("wav", let path?) where !path.isEmpty: return value
        default:
            throw SpecError(description: "expected auto, pulse, alsa[:DEVICE], wav:PATH or null")
        }
    }
}
