// swift-tools-version:6.0
import PackageDescription

/// Settings every Swift target shares: Swift 6 language mode (strict concurrency) is the
/// default for tools-version 6; these upcoming features keep the API surface honest.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// libdbus-1's headers (`pkg-config --cflags dbus-1`; nothing links the library: it is loaded
/// on first use, see CDBusLazy).
#if arch(arm64)
    let multiarch = "aarch64-linux-gnu"
#else
    let multiarch = "x86_64-linux-gnu"
#endif
let dbusHeaders: [CSetting] = [
    .unsafeFlags(["-I/usr/include/dbus-1.0", "-I/usr/lib/\(multiarch)/dbus-1.0/include"])
]

let package = Package(
    name: "Parla",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Parla", targets: ["Parla"]),
        // For apps' own tests: records a sink's monitor to prove sound really arrived.
        .library(name: "ParlaTesting", targets: ["ParlaTesting"]),
        .executable(name: "parla", targets: ["parla"]),
        .executable(name: "speak-selection", targets: ["speak-selection"]),
        .executable(name: "parla-engine", targets: ["parla-engine"]),
        // The engine host's stand-in for pcaudiolib (audio_null.c): espeak-ng without libpulse.
        .library(name: "pcaudio", type: .dynamic, targets: ["CParlaAudioNull"]),
        // The speech-dispatcher output module (Orca, Firefox, spd-say speak through Parla).
        .executable(name: "sd_parla", targets: ["sd_parla"]),
        // libparla: the C API (parla.h) over the library, for programs not written in Swift
        // (scripts/install names it libparla.so.0 and adds parla.pc; python/ wraps it).
        .library(name: "parla-c", type: .dynamic, targets: ["ParlaC"]),
        // Benchmarks (scripts/bench-live, bench-selection, bench-start); never installed.
        .executable(name: "parla-bench", targets: ["parla-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // exp and pow for the pure model, which imports no C library (RealModule only).
        .package(url: "https://github.com/apple/swift-numerics", from: "1.0.0"),
        // FileDescriptor and Errno for ParlaIO's writes (short writes and EINTR handled once).
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        // Runs speak-selection's selection tools (wl-paste, xclip, xsel) with a deadline.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        // `swift package generate-documentation` (scripts/docs); a plugin, nothing is linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // MARK: C libraries
        // Headers only: nothing links these libraries (see the lazy bindings below).
        .systemLibrary(name: "CESpeakNG", providers: [.apt(["libespeak-ng-dev"])]),
        .systemLibrary(name: "CPulseAudio", providers: [.apt(["libpulse-dev"])]),

        // Lazy bindings (scripts/generate-lazy-libraries.py): each library is opened on the
        // first call into it, so a process maps only what it uses (`parla say -o` never
        // maps libpulse; only the engine host maps libespeak-ng).
        .target(name: "CPulseAudioLazy", dependencies: ["CPulseAudio"]),
        .target(name: "CESpeakNGLazy", dependencies: ["CESpeakNG"]),
        .target(name: "CDBusLazy", cSettings: dbusHeaders),

        .target(
            name: "CParlaAudioNull",
            linkerSettings: [.unsafeFlags(["-Xlinker", "-soname=libpcaudio.so.0"])]),

        // MARK: Library
        // The system calls of helper processes (engine hosts, render workers) Swift does not import.
        .target(name: "CParlaProcess"),
        .target(name: "CParlaWorker", dependencies: ["CParlaProcess"]),
        // Piper's neural voices: ONNX Runtime loaded on first use, espeak-ng's phonemes and the
        // model's own phoneme durations (runs where espeak-ng runs: the engine host, render workers).
        .target(name: "CParlaPiper", dependencies: ["CESpeakNGLazy"], linkerSettings: [.linkedLibrary("m")]),
        // No unsafe flags in anything the Parla product uses: SwiftPM refuses them in a package
        // depended on by version (scripts/check-swift-client proves a tagged clone builds).
        // The one driver of both engines (espeak-ng's and Piper's runs, their events and audio),
        // used in engine hosts and, in process, by render workers.
        .target(name: "CParlaEngineDriver", dependencies: ["CESpeakNGLazy", "CParlaPiper"]),
        // The engine host: the driver behind a pipe, in a process of its own (parla-engine).
        .target(name: "CParlaEngineHost", dependencies: ["CParlaEngineDriver", "CParlaProcess"]),
        // Everything Parla runs before main, in one constructor: the helper processes (engine
        // host, render worker, ducking guard) and the parla programs' prestart.
        .target(name: "CParlaBeforeMain", dependencies: ["CParlaEngineHost", "CParlaWorker", "CParlaDuckGuard", "CParlaProcess"]),
        // Restores the streams Parla ducked if Parla's process dies (a helper process; see Ducking.swift).
        .target(name: "CParlaDuckGuard", dependencies: ["CPulseAudioLazy"]),
        // The selection of the focused application over the AT-SPI accessibility bus (speak-selection).
        .target(name: "CParlaATSPI", dependencies: ["CDBusLazy"], cSettings: dbusHeaders),
        // Only in the parla and speak-selection programs: what starts the engine host before main.
        .target(name: "CParlaPrestart", dependencies: ["CParlaEngineHost", "CParlaCommandLine"]),
        // The command-line table the prestart constructor and QuickStart share.
        .target(name: "CParlaCommandLine"),
        // The pure model: utterances, voices, plans, timelines, scheduling, detection. No system calls.
        .target(name: "ParlaCore", dependencies: [.product(name: "RealModule", package: "swift-numerics")], swiftSettings: swiftSettings),
        // Files, descriptors, threads and the clock: atomic files, WAV/timings/caption writers,
        // line and text input, loading the voice catalog and the language model.
        .target(
            name: "ParlaIO", dependencies: ["ParlaCore", "CParlaProcess", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: swiftSettings),
        .target(
            name: "ParlaEngine", dependencies: ["ParlaCore", "ParlaIO", "CParlaEngineDriver", "CParlaEngineHost", "CParlaPiper", "CParlaBeforeMain", "CParlaProcess"],
            swiftSettings: swiftSettings),
        .target(name: "ParlaPulseAudio", dependencies: ["ParlaCore", "ParlaIO", "CPulseAudioLazy", "CParlaDuckGuard"], swiftSettings: swiftSettings),
        // What an app's tests need: SpeechTestRig (live speech on a fake engine, sink and clock)
        // and PulseAudioRecorder (proof that sound reached a real server).
        .target(name: "ParlaTesting", dependencies: ["Parla", "ParlaCore", "ParlaIO", "ParlaPulseAudio", "CPulseAudioLazy"], swiftSettings: swiftSettings),
        // Batch rendering: the renderer and its orchestration of worker processes, the worker
        // protocol and loop, the results log, and the batch input formats.
        .target(name: "ParlaBatch", dependencies: ["ParlaCore", "ParlaIO", "ParlaEngine", "CParlaWorker", "CParlaProcess"], swiftSettings: swiftSettings),
        .target(name: "Parla", dependencies: ["ParlaCore", "ParlaIO", "ParlaBatch", "ParlaEngine", "ParlaPulseAudio"], swiftSettings: swiftSettings),
        // The C API: parla.h's types (CParlaAPI) and their Swift implementation (ParlaC). Only
        // parla_* symbols are exported (parla.map); nothing else in the package links ParlaC.
        .target(name: "CParlaAPI"),
        .target(
            name: "ParlaC", dependencies: ["Parla", "CParlaAPI"], exclude: ["parla.map"], swiftSettings: swiftSettings,
            linkerSettings: [
                .unsafeFlags([
                    "-Xlinker", "-soname=libparla.so.0", "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/ParlaC/parla.map",
                ])
            ]),
        // speech-dispatcher's module protocol, settings and messages (pure: tested with a fake speaker).
        .target(name: "ParlaSpeechd", dependencies: ["ParlaCore"], swiftSettings: swiftSettings),

        // MARK: Command-line tool
        .target(
            name: "ParlaCommands",
            dependencies: [
                "Parla", "ParlaEngine", "CParlaATSPI", "CParlaCommandLine", "CParlaProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "parla",
            dependencies: ["ParlaCommands", "CParlaPrestart", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "speak-selection",
            dependencies: ["ParlaCommands", "CParlaPrestart", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),

        .executableTarget(name: "sd_parla", dependencies: ["Parla", "ParlaSpeechd"], swiftSettings: swiftSettings),

        // The engine host: espeak-ng in a process of its own, with no Swift to load.
        .executableTarget(name: "parla-engine", dependencies: ["CParlaEngineHost"]),
        .executableTarget(
            name: "parla-bench",
            dependencies: ["ParlaCommands", "ParlaTesting", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),

        // MARK: Examples (built by CI)
        .executableTarget(
            name: "example-multilingual-wav",
            dependencies: ["Parla"],
            path: "Examples/multilingual-wav",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "example-announcements",
            dependencies: ["Parla"],
            path: "Examples/announcements",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .testTarget(name: "ParlaCoreTests", dependencies: ["ParlaCore", "ParlaIO", "ParlaSpeechd", "ParlaTestSupport", "ParlaFuzzChecks"], swiftSettings: swiftSettings),
        .target(name: "ParlaFuzzChecks", dependencies: ["ParlaCore"], path: "Tests/Fuzz/Checks", swiftSettings: swiftSettings),
        // Test helpers: processes, seeded text (no audio, so ParlaCoreTests needs no libpulse),
        // and private sound servers for the live tests.
        .target(name: "ParlaTestSupport", dependencies: ["ParlaCore", "ParlaIO"], path: "Tests/ParlaTestSupport", swiftSettings: swiftSettings),
        .target(name: "ParlaAudioTestSupport", dependencies: ["ParlaTestSupport", "ParlaPulseAudio", "ParlaTesting"], path: "Tests/ParlaAudioTestSupport", swiftSettings: swiftSettings),
        .testTarget(name: "ParlaTests", dependencies: ["Parla", "ParlaBatch", "ParlaTesting", "ParlaAudioTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "ParlaCLITests",
            dependencies: [
                "parla", "speak-selection", "sd_parla", "ParlaCore", "ParlaIO", "ParlaAudioTestSupport", "ParlaCommands",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], swiftSettings: swiftSettings),
    ]
)
