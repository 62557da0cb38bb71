import FoundationEssentials
import SpeakAPI

#if canImport(Glibc)
import Glibc
#endif

extension DaemonConfiguration {
    /// Chimes, loudness and the stream's role for ducking.
    static let sound: [DaemonSetting] = [
        .optionalPath(
            "chimes", \.chimesDirectory, valueName: "dir",
            help: "Directory of chimes (WAV, FLAC, Ogg), each named by its file name without extension.",
            shown: "the project's Voices/chimes, found like --voices"
        )
        .inFiles("/usr/share/speakd/voices/chimes"),
        .optionalPath(
            "clips", \.clipsDirectory, valueName: "dir",
            help:
                "Directory of recorded clips (WAV, FLAC, Ogg) that spans play by name ({\"clip\": \"NAME\"} plays NAME.wav), "
                + "or none."),
        .toggle(
            "clips-upload", \.clipsUpload,
            help: "Let PUT /v1/clips/NAME write a clip into the --clips directory, checked as a clip there is "
                + "(whoever may call the API may then change what the hall hears)."),
        chime("high", \.chimeHigh),
        chime("default", \.chimeDefault),
        chime("low", \.chimeLow),
        chime("high", \.chimeAfterHigh, after: true),
        chime("default", \.chimeAfterDefault, after: true),
        chime("low", \.chimeAfterLow, after: true),
        DaemonSetting(
            "loudness", \.loudness, valueName: "LUFS",
            help: "Loudness every announcement and chime is brought to (EBU R128 integrated, -40 to -5), or off.",
            default: -16, shown: "-16"
        ) { value in
            if value.isNone { return nil }
            return try value.number(in: -40...(-5), expected: "LUFS from -40 to -5, or off")
        },
        DaemonSetting(
            "duck", \.duckRoles, valueName: "roles",
            help: "While speakd speaks, lower the other streams of these media roles (music,movie,game) through the "
                + "sound server, for a server that does not duck by itself (PipeWire with WirePlumber 0.5); none for none.",
            default: [], shown: "none"
        ) { value in
            if value.isNone { return [] }
            let roles = value.value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !roles.isEmpty,
                roles.allSatisfy({
                    !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
                })
            else {
                throw value.invalid("expected media roles separated by commas, such as music,movie,game, or none")
            }
            return roles
        },
        DaemonSetting(
            "duck-level", \.duckLevel, valueName: "factor",
            help: "How far --duck lowers the other streams: a linear factor of their volume, 0 to 1 (0.2 is -14 dB).",
            default: 0.2, shown: "0.2"
        ) { value in try value.number(in: 0...1, expected: "a factor from 0 to 1") },
        DaemonSetting(
            "media-role", \.mediaRole, valueName: "role",
            help: "PulseAudio/PipeWire media.role of speakd's stream (audio pulse or auto), for the server's ducking; "
                + "none for no role. With a role the stream is closed 0.5 s after the last announcement, so ducking ends.",
            default: "announcement", shown: "announcement"
        ) { value in
            if value.isNone { return nil }
            guard value.value.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw value.invalid("expected a role name such as announcement")
            }
            return value.value
        },
    ]

    private static func chime(
        _ priority: String, _ field: any WritableKeyPath<DaemonConfiguration, String?> & Sendable, after: Bool = false
    ) -> DaemonSetting {
        DaemonSetting(
            after ? "chime-after-\(priority)" : "chime-\(priority)", field, valueName: "name",
            help:
                "Chime played \(after ? "after" : "before") \(priority)-priority announcements that name none, or none.",
            default: nil, shown: "none"
        ) { value in
            if value.isNone { return nil }
            guard value.value.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw value.invalid("expected a chime's name (letters, digits, - and _) or none")
            }
            return value.value
        }
    }
}
