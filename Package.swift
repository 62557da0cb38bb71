// swift-tools-version: 6.1
import PackageDescription

/// One list of Swift settings for every target. Release builds of the package's own modules are
/// optimised for size, each function in a section of its own, so that `lean(ordering:)` can place
/// what the daemon and the worker run until idle together (scripts/build-release does the same for
/// the dependencies too).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-Osize", "-Xfrontend", "-function-sections"], .when(platforms: [.linux], configuration: .release)),
]

// libespeak-ng as a shared library, for everything that runs espeak-ng in its own process or
// lists its voices (the daemon, `speak`, benchmarks, tests). CEspeakNG's module map links nothing
// itself: the engine worker links Debian's static archive instead (see speakd-engine-worker).
let sharedEspeak: [LinkerSetting] = [.linkedLibrary("espeak-ng")]

// The daemon and the engine worker, linked for a small resident size in every release build
// (`swift build -c release` too, not only scripts/build-release, which passes the same flags to
// every product): lld packs their relative relocations (RELR: the loader no longer reads and
// keeps about 0.85 MB of them at every start) and folds identical functions, and the functions
// `product` runs from its start to idle are placed first, in the order they first run
// (scripts/order-file/make lists them). Nothing is exported to the dynamic symbol table (SwiftPM
// exports every symbol of an executable, for tests that import it; none here does): the loader
// searched those tables, 2.9 MB for the static daemon, at every start and left about 2 MB of them
// resident. Release builds on Linux only; the toolchain ships lld.
func lean(ordering product: String) -> [LinkerSetting] {
    let order = String(#filePath.dropLast("Package.swift".count)) + "scripts/order-file/\(product).order"
    return [
        .unsafeFlags(
            [
                "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--icf=all",
                "-Xlinker", "--no-export-dynamic",
                "-Xlinker", "--symbol-ordering-file=\(order)", "-Xlinker", "--no-warn-symbol-ordering",
            ],
            .when(platforms: [.linux], configuration: .release))
    ]
}
// scripts/build-release passes the same link tuning to every product it builds, with the order
// list's staleness check, and -Osize and function sections to the dependencies as well: a plain
// `swift build -c release` cannot reach them, and its dependencies' code stays spread out.

let package = Package(
    name: "speakd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "speak", targets: ["speak"]),
        .executable(name: "speakd", targets: ["speakd"]),
        .executable(name: "speakd-fleet-bench", targets: ["speakd-fleet-bench"]),
        .library(name: "SpeechModel", targets: ["SpeechModel"]),
        // For the fuzz package in Fuzz/: request bodies and the IPA transcriber.
        .library(name: "SpeakAPI", targets: ["SpeakAPI"]),
        .library(name: "EspeakEngine", targets: ["EspeakEngine"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // Without its default traits: FullFoundation would load Foundation and ICU into the daemon
        // (the URL-encoded form coders are all it adds, and speakd reads JSON only), and
        // ConfigurationSupport is for swift-configuration, which speakd does not use.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.20.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        // `swift package generate-documentation` for the DocC catalogues (scripts/docs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // SQLite through GRDB, on Debian's libsqlite3: schedules, the audit log, the fleet's request ids.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // C libraries: one system-library target each, resolved through pkg-config.
        // Headers only: which libespeak-ng (shared or static) a product links is its own choice.
        .systemLibrary(name: "CEspeakNG"),
        .systemLibrary(
            name: "CPulseAudio",
            pkgConfig: "libpulse",
            providers: [.apt(["libpulse-dev"])]
        ),
        .systemLibrary(
            name: "CSeccomp",
            pkgConfig: "libseccomp",
            providers: [.apt(["libseccomp-dev"])]
        ),
        // EBU R128 loudness and true peak: announcements and chimes are played at one loudness.
        .systemLibrary(
            name: "CEbur128",
            pkgConfig: "libebur128",
            providers: [.apt(["libebur128-dev"])]
        ),
        // Decodes chime files (WAV, FLAC, Ogg…).
        .systemLibrary(
            name: "CSndfile",
            pkgConfig: "sndfile",
            providers: [.apt(["libsndfile1-dev"])]
        ),
        // Resamples chimes to the engine's rate.
        .systemLibrary(
            name: "CSamplerate",
            pkgConfig: "samplerate",
            providers: [.apt(["libsamplerate0-dev"])]
        ),
        .systemLibrary(
            name: "CALSA",
            pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]
        ),
        // libmosquitto's declarations, and forwarders that load the library when a fleet link
        // starts (Debian's libmosquitto-dev; see loader.c).
        .target(name: "CMosquitto"),

        // Attributed utterances, BCP 47 tags, speech attributes, SSML, voices. Foundation only;
        // no queue, HTTP or audio concepts.
        .target(name: "SpeechModel", dependencies: ["PosixSupport"], swiftSettings: swiftSettings),
        // Threads, a condition lock and child processes on pthreads and posix_spawn: what the
        // daemon and its workers would otherwise load Foundation for.
        .target(name: "PosixSupport", dependencies: ["CPosixSupport"], swiftSettings: swiftSettings),
        .systemLibrary(name: "CPosixSupport"),
        .target(
            name: "PiperEngine",
            dependencies: [
                "WorkerRuntime", "PosixSupport", "SpeechModel", "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        // The engine seam: the renderer protocol, prepared utterances, PCM chunks and their
        // format, engine events, the WAV header; the render cache in front of the engines, in
        // memory and in a directory on disk.
        .target(
            name: "SpeechRendering",
            dependencies: ["PosixSupport", "SpeechModel", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings),
        // The only module that imports CEspeakNG.
        .target(
            name: "EspeakEngine",
            dependencies: [
                "CEspeakNG", "PosixSupport", "SpeechModel", "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What every engine's worker process shares, whatever its engine: the one frame protocol
        // between the daemon and a worker, the worker as the daemon holds it (its reader thread,
        // its job with back-pressure and cancel), its standard error, the stall watch, the restart
        // backoff and the start-up watchdog.
        .target(
            name: "WorkerRuntime",
            dependencies: [
                "PosixSupport", "SpeechModel", "SpeechRendering", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // espeak-ng's worker processes: the daemon's pool, the template that forks them, and the
        // espeak-ng input as its worker reads it.
        .target(
            name: "EngineWorkers",
            dependencies: [
                "WorkerRuntime", "EspeakEngine", "PosixSupport", "SpeechModel", "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Confines an engine worker: no capabilities, an unprivileged user under a root daemon,
        // no_new_privs, a seccomp filter, Landlock.
        .target(name: "EngineSandbox", dependencies: ["CSeccomp"], swiftSettings: swiftSettings),
        // pcaudio's API with no device behind it, for the worker's static libespeak-ng.
        .target(name: "CNoAudioDevice"),
        .executableTarget(
            name: "speakd-engine-worker",
            dependencies: [
                "EngineWorkers", "WorkerRuntime", "EngineSandbox", "EspeakEngine", "PosixSupport", "CPosixSupport",
                "SpeechModel",
                "SpeechRendering", "CNoAudioDevice",
            ],
            swiftSettings: swiftSettings,
            // libespeak-ng from Debian's static archive, so the worker does not load libpcaudio and
            // the PulseAudio and ALSA clients, codecs, X11 and D-Bus libraries behind it (about
            // 0.5 MB of relocated data per worker); its audio calls land in CNoAudioDevice.
            linkerSettings: [
                .unsafeFlags(["-Xlinker", "-l:libespeak-ng.a", "-Xlinker", "-l:libsonic.so.0"])
            ] + lean(ordering: "speakd-engine-worker")
        ),
        // Sinks: PulseAudio, ALSA, WAV file, null; chimes and loudness.
        .target(
            name: "AudioOutput",
            dependencies: [
                "CPulseAudio", "CALSA", "CEbur128", "CSndfile", "CSamplerate", "PosixSupport", "SpeechModel",
                "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The scheduler: priorities, interruption, cancel, expiry, exactly-once finished events.
        .target(
            name: "AnnouncementQueue",
            dependencies: [
                "PosixSupport", "SpeakAPI", "SpeechModel", "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The one way in below every front (HTTP, MQTT): strict decode, limits, chimes, output,
        // prepare, the health gate and submit, with one error type that each front maps.
        .target(
            name: "AnnouncementIntake",
            dependencies: [
                "AnnouncementQueue", "PosixSupport", "SpeakAPI", "SpeakService", "SpeechModel", "SpeechRendering",
            ],
            swiftSettings: swiftSettings
        ),
        // The daemon's database (SQLite through GRDB): schedules, the audit log, the fleet's request ids.
        .target(
            name: "SpeakState", dependencies: [.product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings),
        // Schedules as rules: the definition, RFC 5545 recurrences in a time zone, what to do when. The
        // announcement inside a definition is the wire vocabulary's request, decoded as strictly.
        .target(name: "SpeakSchedules", dependencies: ["SpeakAPI"], swiftSettings: swiftSettings),
        // What the daemon keeps: the audit log's writer (a recorder of the queue's events and the
        // intake's refusals), and where the state store's error becomes the service's.
        .target(
            name: "AnnouncementRecords",
            dependencies: [
                "AnnouncementIntake", "AnnouncementQueue", "SpeakAPI", "SpeakService", "SpeakState",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        // The scheduler: the schedules kept in the state store, checked like any announcement when
        // they are made, and turned into announcements through the intake when their slots come.
        .target(
            name: "SpeakScheduler",
            dependencies: [
                "AnnouncementIntake", "AnnouncementQueue", "AnnouncementRecords", "SpeakAPI", "SpeakSchedules",
                "SpeakService", "SpeakState", "SpeechModel", "SpeechRendering",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        // The wire vocabulary: requests, events, states, statuses, errors, health, endpoints.
        .target(name: "SpeakAPI", dependencies: ["SpeechModel"], swiftSettings: swiftSettings),
        // The service behind the door: the intake, the schedules and the audit log as one
        // `SpeakService`, which the daemon builds and hands to every front.
        .target(
            name: "ServiceCore",
            dependencies: [
                "AnnouncementIntake", "AnnouncementRecords", "SpeakAPI", "SpeakScheduler", "SpeakSchedules",
                "SpeakService", "SpeakState", "SpeechModel", "SpeechRendering",
            ],
            swiftSettings: swiftSettings),
        // The one door every front speaks to: the `SpeakService` protocol and its one error,
        // `SpeakError`, in the API's wire types. Fronts depend on this and SpeakAPI, never on the
        // queue, the state store or the scheduler that implement it.
        .target(
            name: "SpeakService", dependencies: ["SpeakAPI", "SpeakSchedules", "SpeechModel", "SpeechRendering"],
            swiftSettings: swiftSettings),
        // A client of the API: the HTTP client over TCP or the Unix socket, and the access token.
        .target(name: "SpeakClient", dependencies: ["SpeakAPI", "PosixSupport"], swiftSettings: swiftSettings),
        // The `speak` command, as a library so tests can parse and run it.
        .target(
            name: "SpeakCLI",
            dependencies: [
                "SpeakAPI", "SpeakClient", "SpeechModel", "SpeechRendering", "EspeakEngine", "EngineWorkers",
                "AudioOutput", "SpeakMQTT", "SpeakdVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),
        .executableTarget(
            name: "speak",
            dependencies: ["SpeakCLI", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // EspeakEngine against raw libespeak-ng, measured in the same run (build with scripts/build-release).
        .executableTarget(
            name: "speakd-engine-bench",
            dependencies: [
                "EspeakEngine", "EngineWorkers", "CEspeakNG", "SpeechModel", "SpeechRendering", "SpeakTestSupport",
                "AudioOutput",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/EngineBenchmark",
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),
        // The only module that imports the HTTP framework: routes, SSE, TCP + Unix-socket listeners.
        .target(
            name: "SpeakServer",
            dependencies: [
                "SpeakAPI", "SpeakService", "SpeechModel", "SpeechRendering",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            exclude: ["StatusPage", "Console"],
            swiftSettings: swiftSettings,
            plugins: ["EmbedServedFiles"]
        ),
        // The only module that imports CMosquitto: the MQTT 5 client of the fleet link and of the
        // `speak --mqtt` sender.
        .target(name: "SpeakMQTT", dependencies: ["CMosquitto"], swiftSettings: swiftSettings),
        // A kiosk's MQTT fleet link: announcements in through the intake, events, outcomes and
        // status out.
        .target(
            name: "SpeakFleet",
            dependencies: [
                "SpeakMQTT", "SpeakAPI", "SpeakSchedules", "SpeakService",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // speakd's version, from the top entry of debian/changelog; `-dev` after it in debug builds.
        .target(
            name: "SpeakdVersion",
            swiftSettings: swiftSettings + [.define("SPEAKD_RELEASE", .when(configuration: .release))],
            plugins: ["EmbedVersion"]),
        .plugin(name: "EmbedVersion", capability: .buildTool(), dependencies: ["speakd-embed-text"]),
        // speech-dispatcher's protocol (SSIP) on a Unix socket, through the intake: spd-say,
        // python3-speechd, Orca and browsers speak through speakd unchanged.
        .target(
            name: "SpeakSSIP",
            dependencies: [
                "PosixSupport", "SpeakAPI", "SpeakService", "SpeechModel", "StreamListener",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // A listening socket on SwiftNIO whose connections carry bytes both ways, and its accept
        // loop: what the SSIP and Wyoming fronts listen with.
        .target(
            name: "StreamListener",
            dependencies: [
                "PosixSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The Wyoming protocol on TCP or a Unix socket, over the one service like every front:
        // Home Assistant speaks through speakd as a TTS server and an announce target.
        .target(
            name: "SpeakWyoming",
            dependencies: [
                "PosixSupport", "SpeakAPI", "SpeakService", "SpeechModel", "SpeechRendering", "StreamListener",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The repository's openapi.json and the status page, compiled into SpeakServer.
        .plugin(name: "EmbedServedFiles", capability: .buildTool(), dependencies: ["speakd-embed-text"]),
        .executableTarget(name: "speakd-embed-text", swiftSettings: swiftSettings),
        // Builds and runs the daemon: configuration, wiring, services, signals, systemd readiness.
        .target(
            name: "SpeakDaemon",
            dependencies: [
                "SpeakServer", "SpeakAPI", "SpeakClient", "SpeechModel", "SpeechRendering", "AnnouncementQueue",
                "AnnouncementIntake", "AnnouncementRecords", "SpeakScheduler", "SpeakState", "SpeakService",
                "ServiceCore", "EspeakEngine", "EngineWorkers", "PiperEngine",
                "AudioOutput",
                "SpeakFleet", "SpeakMQTT", "SpeakSSIP", "SpeakWyoming", "SpeakdVersion",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),
        .executableTarget(
            name: "speakd", dependencies: ["PosixSupport", "SpeakDaemon"], swiftSettings: swiftSettings,
            linkerSettings: lean(ordering: "speakd")),
        // The built speakd against a private PulseAudio server: request → sound, sound → finished,
        // cancel → silence; with --ssip against speech-dispatcher, with --piper against
        // piper.http_server (build with scripts/build-release).
        .executableTarget(
            name: "speakd-latency-bench",
            dependencies: [
                "SpeakAPI", "SpeakClient", "SpeakTestSupport", "SpeechModel", "SpeechRendering", "EspeakEngine",
                "AudioOutput",
            ],
            path: "Benchmarks/LatencyBenchmark",
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),

        // POST /v1/speech through a release speakd against raw libespeak-ng in two processes
        // rendering the same espeak input, and
        // the idle PSS of speakd with its workers (build with scripts/build-release).
        .executableTarget(
            name: "speakd-render-bench",
            dependencies: ["CEspeakNG", "EspeakEngine", "SpeakAPI", "SpeakClient", "SpeakTestSupport", "SpeechModel"],
            path: "Benchmarks/RenderBenchmark",
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),

        // An idle speakd with two workers on a private PulseAudio null sink: PSS by process and by
        // mapping, and wake-ups per second of every thread of the daemon and its workers.
        .executableTarget(
            name: "speakd-idle-bench",
            dependencies: ["SpeakTestSupport"],
            path: "Benchmarks/IdleBenchmark",
            swiftSettings: swiftSettings
        ),

        // Three speakd kiosks and a private mosquitto: publish → first sample at each sink, and
        // 1,000 announcements fanned out (build with scripts/build-release).
        .executableTarget(
            name: "speakd-fleet-bench",
            dependencies: ["SpeakAPI", "SpeakMQTT", "SpeakTestSupport"],
            path: "Benchmarks/FleetBenchmark",
            swiftSettings: swiftSettings
        ),

        // Test helpers: a private PulseAudio server, a monitor recorder, audio analysis.
        .target(
            name: "SpeakTestSupport",
            dependencies: [
                "PosixSupport", "SpeechModel", "SpeechRendering", "SpeakAPI", "SpeakClient", "SpeakSchedules",
                "SpeakService",
            ],
            swiftSettings: swiftSettings
        ),

        // A test target's name says its tier (scripts/test runs them cheapest first): `…AudioTests`
        // run the real engine, worker processes or a private sound server, one at a time;
        // `…IntegrationTests` drive the built daemon from outside; `…ExternalTests` run other
        // programs against it (the fuzz pass, schemathesis, Chromium); any other `…Tests` is the
        // unit tier, in parallel: pure logic, fakes and in-process servers. A test goes in the
        // target of its tier.
        .testTarget(
            name: "SpeechModelTests",
            dependencies: ["SpeechModel"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EspeakEngineAudioTests",
            dependencies: ["EspeakEngine", "SpeechRendering", "SpeakTestSupport"],
            resources: [],
            swiftSettings: swiftSettings,
            linkerSettings: sharedEspeak
        ),
        // Enters the worker sandbox and tries what a hijacked worker would; run by EngineWorkersAudioTests.
        .executableTarget(
            name: "speakd-sandbox-probe",
            dependencies: ["EngineSandbox"],
            path: "Tests/SandboxProbe",
            // The Piper worker's probe, run with the Piper venv's Python by PiperTests.sandboxProbe.
            exclude: ["piper-sandbox-probe.py"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EngineWorkersTests",
            dependencies: ["EngineWorkers", "WorkerRuntime", "EspeakEngine", "SpeechModel", "SpeechRendering"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PosixSupportTests", dependencies: ["PosixSupport", "SpeakTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "WorkerRuntimeTests",
            dependencies: [
                "WorkerRuntime", "PosixSupport", "SpeechModel", "SpeechRendering",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EngineWorkersAudioTests",
            dependencies: [
                "EngineWorkers", "WorkerRuntime", "EspeakEngine", "PosixSupport", "SpeechModel", "SpeechRendering",
                "SpeakTestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AudioOutputTests",
            dependencies: ["AudioOutput", "SpeechRendering", "SpeakTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AudioOutputAudioTests",
            dependencies: ["AudioOutput", "SpeechRendering", "SpeakTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AnnouncementQueueTests",
            dependencies: ["AnnouncementQueue", "SpeakAPI", "SpeechRendering", "SpeakTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The render cache: memory, disk files, the engines' fingerprint.
        .testTarget(
            name: "SpeechRenderingTests",
            dependencies: [
                "SpeechRendering", "SpeechModel", "SpeakTestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the intake's tests and the routes' tests over the real intake share: a real queue
        // with a speaker whose announcements finish when the test says, and switchable health.
        .target(
            name: "IntakeTestSupport",
            dependencies: [
                "AnnouncementIntake", "AnnouncementQueue", "SpeakAPI", "SpeakTestSupport", "SpeechModel",
                "SpeechRendering",
            ],
            path: "Tests/IntakeTestSupport",
            swiftSettings: swiftSettings
        ),
        // The intake below every front: validation, private announcements, preparation.
        .testTarget(
            name: "AnnouncementIntakeTests",
            dependencies: [
                "AnnouncementIntake", "AnnouncementQueue", "IntakeTestSupport", "SpeakAPI", "SpeakService",
                "SpeakTestSupport", "SpeechModel",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakServerTests",
            dependencies: [
                "SpeakServer", "SpeakAPI", "SpeakClient", "AnnouncementQueue", "AnnouncementIntake", "SpeechModel",
                "SpeechRendering", "SpeakTestSupport", "SpeakScheduler", "SpeakState", "SpeakService",
                "ServiceCore", "IntakeTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakDaemonTests",
            dependencies: [
                "SpeakDaemon", "SpeakServer", "AnnouncementIntake", "SpeakAPI", "SpeakClient", "SpeakService",
                "SpeakTestSupport",
                "SpeechModel", "SpeechRendering", "SpeakdVersion", "PiperEngine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakDaemonAudioTests",
            dependencies: [
                "SpeakDaemon", "SpeakServer", "SpeakAPI", "SpeakClient", "AnnouncementQueue", "SpeakTestSupport",
                "SpeechModel", "SpeechRendering", "AudioOutput", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the integration and external tests share to drive the built daemon: the daemon on a
        // recorded private PulseAudio sink with its event stream, the recording, speakd with an SSIP
        // socket, and the Python tools of `scripts/install-deps --test`.
        .target(
            name: "SpeakdHarness",
            dependencies: ["SpeakAPI", "SpeakClient", "SpeakTestSupport", "SpeechModel"],
            path: "Tests/SpeakdHarness",
            swiftSettings: swiftSettings
        ),
        // The built speak and speakd executables, heard through a private PulseAudio server.
        .testTarget(
            name: "SpeakdIntegrationTests",
            dependencies: [
                "SpeakdHarness", "SpeakAPI", "SpeakClient", "SpeakTestSupport", "SpeechModel", "SpeechRendering",
                "AudioOutput",
                "SpeakMQTT", "SpeakFleet", "PiperEngine", "EngineWorkers", "WorkerRuntime",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Other programs against the built daemon: schemathesis and headless Chromium.
        .testTarget(
            name: "SpeakdExternalTests",
            dependencies: ["SpeakdHarness", "SpeakAPI", "SpeakClient", "SpeakTestSupport", "SpeechModel"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakAPITests",
            dependencies: ["SpeakAPI", "SpeakClient", "SpeechModel"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakSSIPTests",
            dependencies: ["SpeakSSIP", "SpeakAPI", "SpeakService", "SpeakTestSupport", "SpeechModel"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakWyomingTests",
            dependencies: [
                "SpeakWyoming", "SpeakAPI", "SpeakService", "SpeakTestSupport", "SpeechRendering", "SpeechModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ServiceCoreTests",
            dependencies: ["ServiceCore", "SpeakService", "SpeakState"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakFleetTests",
            dependencies: ["SpeakFleet", "SpeakMQTT", "SpeakAPI", "SpeakService", "SpeakTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakStateTests",
            dependencies: ["SpeakState", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SpeakSchedulesTests", dependencies: ["SpeakSchedules"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AnnouncementRecordsTests",
            dependencies: [
                "AnnouncementRecords", "SpeakState", "SpeakAPI",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SpeakSchedulerTests", dependencies: ["SpeakScheduler", "SpeakSchedules"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SpeakCLITests",
            dependencies: [
                "SpeakCLI", "SpeakAPI", "SpeechModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SpeakCLIAudioTests",
            dependencies: ["SpeakTestSupport", "AudioOutput", "SpeechRendering"],
            swiftSettings: swiftSettings
        ),
        // The ASan fuzz pass (scripts/fuzz): an external tool run from a test.
        .testTarget(name: "FuzzExternalTests", swiftSettings: swiftSettings),
    ]
)
