// swift-tools-version: 5.4
import PackageDescription

/// libFuzzer targets for the parsers that take untrusted input. A package of its own because
/// its executables have no `main` (libFuzzer's runtime provides it): they link only when built
/// with `-sanitize=fuzzer`, which `scripts/fuzz` passes, into its own scratch path.
///
/// Tools version 5.4, as apple/swift-protobuf's FuzzTesting keeps below 5.5: from 5.5 on,
/// SwiftPM links an executable with `main` renamed to `<module>_main`, which a libFuzzer target
/// built with `-parse-as-library` does not define.
let package = Package(
    name: "speakd-fuzz",
    dependencies: [.package(name: "speakd", path: "..")],
    targets: [
        // What every target checks beyond "does not crash": errors name their field, and what is
        // accepted survives the wire.
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "SpeakAPI", package: "speakd"), .product(name: "SpeechModel", package: "speakd"),
            ]
        ),
        // A request body as the daemon decodes it (`AnnouncementRequest.decode(json:limits:)`).
        .executableTarget(
            name: "FuzzRequestJSON",
            dependencies: [
                "FuzzSupport", .product(name: "SpeakAPI", package: "speakd"),
                .product(name: "SpeechModel", package: "speakd"),
            ]
        ),
        // An SSML document as `speak --ssml` and a request's `ssml` field parse it.
        .executableTarget(
            name: "FuzzSSML",
            dependencies: [
                "FuzzSupport", .product(name: "SpeakAPI", package: "speakd"),
                .product(name: "SpeechModel", package: "speakd"),
            ]
        ),
        // A BCP 47 tag (`language`, `xml:lang`).
        .executableTarget(
            name: "FuzzLanguageTag",
            dependencies: ["FuzzSupport", .product(name: "SpeechModel", package: "speakd")]
        ),
        // A span's `ipa`, transcribed to espeak-ng phonemes; no libespeak-ng call is involved.
        .executableTarget(
            name: "FuzzIPA",
            dependencies: [
                "FuzzSupport", .product(name: "SpeechModel", package: "speakd"),
                .product(name: "EspeakEngine", package: "speakd"),
            ],
            // EspeakEngine's module map links no libespeak-ng: each product picks one.
            linkerSettings: [.linkedLibrary("espeak-ng")]
        ),
    ]
)
