import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import ParlaAudioTestSupport
import Testing

/// A mirror of Piper's catalog served over HTTP on loopback by Tests/Fixtures/voice_mirror_server.py,
/// with faults picked by the first part of the URL (ok, drop, dropalways, damaged, missing, slow).
/// It holds the joe voice (the files scripts/setup fetched, linked) and a small made-up voice.
/// Unchecked: it holds the server's `Process`, which is not Sendable; it is only started in
/// `init` and killed in `deinit`.
final class VoiceMirror: @unchecked Sendable {
    let directory: URL
    let port: Int
    private let server: Process
    private let log: URL
    /// The small voice's files, which the mirror's entries link to.
    private let originals: URL

    /// A small voice (a model of random bytes, a real config): installs fast.
    static let tiny = "xx_XX-tiny-low"
    static let joe = "en_US-joe-medium"

    init() throws {
        directory = try makeTemporaryDirectory()
        let fm = FileManager.default
        var entries: [String: Any] = [:]
        let directory = self.directory
        func add(_ name: String, language: String, files: [(path: String, contents: URL)]) throws {
            var listed: [String: Any] = [:]
            for file in files {
                let target = directory.appendingPathComponent(file.path)
                try fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try fm.createSymbolicLink(at: target, withDestinationURL: file.contents)
                let data = try Data(contentsOf: file.contents)
                let md5 = try runProcess("/usr/bin/md5sum", [file.contents.path]).output.prefix(32)
                listed[file.path] = ["size_bytes": data.count, "md5_digest": String(md5)]
            }
            entries[name] = [
                "key": name, "name": name.split(separator: "-")[1], "quality": name.split(separator: "-")[2], "num_speakers": 1,
                "language": ["code": language, "name_english": "English", "country_english": "Nowhere"], "files": listed,
            ]
        }
        let originals = try makeTemporaryDirectory()
        self.originals = originals
        let model = originals.appendingPathComponent("tiny.onnx")
        try Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }).write(to: model)
        let config = originals.appendingPathComponent("tiny.onnx.json")
        let joeConfig = try String(contentsOfFile: PiperFixture.model + ".json", encoding: .utf8)
        try joeConfig.write(to: config, atomically: true, encoding: .utf8)
        let card = originals.appendingPathComponent("MODEL_CARD")
        try "# tiny\nA voice for tests.\n".write(to: card, atomically: true, encoding: .utf8)
        try add(
            Self.tiny, language: "xx_XX",
            files: [
                ("xx/xx_XX/tiny/low/\(Self.tiny).onnx", model), ("xx/xx_XX/tiny/low/\(Self.tiny).onnx.json", config),
                ("xx/xx_XX/tiny/low/MODEL_CARD", card),
            ])
        try add(
            Self.joe, language: "en_US",
            files: [
                ("en/en_US/joe/medium/\(Self.joe).onnx", URL(fileURLWithPath: PiperFixture.model)),
                ("en/en_US/joe/medium/\(Self.joe).onnx.json", URL(fileURLWithPath: PiperFixture.model + ".json")),
            ])
        try JSONSerialization.data(withJSONObject: entries, options: [.sortedKeys]).write(to: directory.appendingPathComponent("voices.json"))
        // Broken catalogs, served as MODE-voices.json.
        try "<html>Not found</html>".write(to: directory.appendingPathComponent("notjson-voices.json"), atomically: true, encoding: .utf8)
        let noFiles: [String: Any] = [Self.tiny: ["key": Self.tiny, "language": ["code": "xx_XX"], "files": [String: Any]()]]
        try JSONSerialization.data(withJSONObject: noFiles).write(to: directory.appendingPathComponent("nofiles-voices.json"))

        log = directory.appendingPathComponent("requests.log")
        fm.createFile(atPath: log.path, contents: nil)
        server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/voice_mirror_server.py")
        server.arguments = ["python3", "-u", script.path, directory.path]
        server.standardOutput = try FileHandle(forWritingTo: log)
        try server.run()
        var port = 0
        for _ in 0..<100 where port == 0 {
            usleep(50_000)
            port = Int((try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").first ?? "") ?? 0
        }
        self.port = port
        guard port > 0 else { throw MirrorError(description: "the mirror server did not start") }
    }

    struct MirrorError: Error, CustomStringConvertible { var description: String }

    deinit {
        kill(server.processIdentifier, SIGKILL)
        server.waitUntilExit()
        removeTemporaryDirectory(directory)
        removeTemporaryDirectory(originals)
    }

    /// The catalog's URL in `mode`.
    func url(_ mode: String = "ok") -> String { "http://127.0.0.1:\(port)/\(mode)" }

    /// The requests so far ("GET PATH RANGE").
    var requests: [String] { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").dropFirst().map(String.init) }
}

/// `parla voices install / remove / --available` against the mirror, each test with a data
/// directory of its own (XDG_DATA_HOME), so that nothing of the user's is touched.
@Suite("Installing voices by name", .serialized)
final class VoiceInstallCLITests: Sendable {
    let mirror: VoiceMirror
    let data: URL

    init() throws {
        if let missing = PiperFixture.missing { throw VoiceMirror.MirrorError(description: missing) }
        mirror = try VoiceMirror()
        data = try makeTemporaryDirectory()
    }

    /// The voices a test installed (joe is 63 MB) go with its data directory.
    deinit { removeTemporaryDirectory(data) }

    var voices: URL { data.appendingPathComponent("parla/voices") }

    func parla(_ args: [String], _ extra: [String: String?] = [:]) throws -> ProcessResult {
        var env: [String: String?] = [
            "XDG_DATA_HOME": data.path, "PARLA_PIPER_VOICES": nil, "PARLA_VOICE_CATALOG": nil, "PARLA_ONNXRUNTIME": PiperFixture.runtime,
            "LANG": "C.UTF-8", "LANGUAGE": nil, "XDG_DATA_DIRS": "/nonexistent",
        ]
        for (k, v) in extra { env[k] = v }
        return try runProcess(CLITests.binary, args, environment: env)
    }

    func listed() throws -> [String] {
        let r = try parla(["voices", "--json"])
        let all = try JSONSerialization.jsonObject(with: Data(r.output.utf8)) as? [[String: Any]] ?? []
        return all.filter { $0["usable"] as? Bool != false }.compactMap { $0["identifier"] as? String }.filter { $0.hasPrefix("piper.") }
    }

    /// Files in the voice directory, hidden ones (the staging area) included.
    func files(_ sub: String = "") -> [String] {
        ((try? FileManager.default.subpathsOfDirectory(atPath: voices.path + sub)) ?? []).sorted()
    }

    @Test func joeInstalledByNameSpeaks() throws {
        let r = try parla(["voices", "install", VoiceMirror.joe, "--catalog", mirror.url()])
        #expect(r.status == 0, "\(r.error)")
        #expect(r.output.contains("Installed piper.\(VoiceMirror.joe) in \(voices.path)"), "\(r.output)")
        // Not a terminal: one line a file, each checked.
        #expect(r.error.contains("\(VoiceMirror.joe).onnx: 63.2 MB, size and md5 checked"), "\(r.error)")
        #expect(files() == ["\(VoiceMirror.joe).onnx", "\(VoiceMirror.joe).onnx.json"])
        #expect(try listed() == ["piper.\(VoiceMirror.joe)"])
        let wav = data.appendingPathComponent("joe.wav").path
        let said = try parla(["say", "-v", "piper.\(VoiceMirror.joe)", "-o", wav, "Installed by name."])
        #expect(said.status == 0, "\(said.error)")
        #expect(((try? FileManager.default.attributesOfItem(atPath: wav)[.size] as? Int) ?? 0) > 20_000)
        // Again: nothing is fetched.
        let before = mirror.requests.count
        let again = try parla(["voices", "install", "piper.\(VoiceMirror.joe)", "--catalog", mirror.url()])
        #expect(again.status == 0 && again.output.contains("already installed"), "\(again.output)")
        #expect(mirror.requests.count == before + 1)  // voices.json only
        // --available marks it.
        let available = try parla(["voices", "--available", "--catalog", mirror.url(), "-l", "en"])
        #expect(available.status == 0, "\(available.error)")
        let line = available.output.split(separator: "\n").first { $0.hasPrefix(VoiceMirror.joe) } ?? ""
        #expect(line.contains("en-US") && line.contains("medium") && line.contains("63.2 MB") && line.contains("yes"), "\(available.output)")
        #expect(!available.output.contains(VoiceMirror.tiny), "-l en lists only English voices")
    }

    @Test func aTransferThatBreaksOffResumes() throws {
        // Each file's first request breaks off halfway: the install goes on from there.
        let r = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("drop")])
        #expect(r.status == 0, "\(r.error)")
        let model = mirror.requests.filter { $0.contains("\(VoiceMirror.tiny).onnx ") }
        #expect(model.count == 2 && model[0].hasSuffix(" -") && model[1].contains("bytes=\((3 << 20) / 2)-"), "\(model)")
        #expect(try listed() == ["piper.\(VoiceMirror.tiny)"])
        #expect(files().contains("\(VoiceMirror.tiny).MODEL_CARD"))
    }

    @Test func aTransferThatKeepsBreakingResumesOnTheNextRun() throws {
        let r = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("dropalways")])
        #expect(r.status != 0)
        #expect(r.error.contains("broke off") && r.error.contains("Run the same command again to resume"), "\(r.error)")
        #expect(try listed().isEmpty)
        #expect(!files().contains { $0.hasSuffix(".onnx") || $0.hasSuffix(".onnx.json") }, "\(files())")
        let partial = files().filter { $0.hasSuffix(".part") }
        #expect(!partial.isEmpty && partial.allSatisfy { $0.hasPrefix(".parla-partial/") }, "\(files())")
        let resumed = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url()])
        #expect(resumed.status == 0, "\(resumed.error)")
        // What the broken transfer left was resumed, not fetched again.
        #expect(mirror.requests.contains { $0.contains("/ok/") && $0.contains(" bytes=") && !$0.contains("bytes=0-") }, "\(mirror.requests)")
        #expect(try listed() == ["piper.\(VoiceMirror.tiny)"])
        #expect(!files().contains { $0.hasPrefix(".parla-partial") }, "\(files())")
    }

    @Test func aDamagedFileIsDeleted() throws {
        let r = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("damaged")])
        #expect(r.status != 0)
        #expect(r.error.contains("\(VoiceMirror.tiny).onnx arrived damaged") && r.error.contains("it was deleted"), "\(r.error)")
        #expect(!files().contains { $0.hasSuffix(".onnx.part") || $0.hasSuffix(".onnx") }, "\(files())")
        #expect(try listed().isEmpty)
    }

    @Test func catalogAndServerFailures() throws {
        let missing = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("missing")])
        #expect(missing.status != 0 && missing.error.contains("HTTP 404"), "\(missing.error)")
        let unknown = try parla(["voices", "install", "en_US-jo-medium", "--catalog", mirror.url()])
        #expect(unknown.status != 0 && unknown.error.contains("Did you mean en_US-joe-medium?"), "\(unknown.error)")
        let nowhere = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", "http://127.0.0.1:9/"])
        #expect(nowhere.status != 0 && nowhere.error.contains("Cannot reach"), "\(nowhere.error)")
        let noDirectory = try parla(["voices", "--available"], ["PARLA_VOICE_CATALOG": data.path + "/no-such-mirror"])
        #expect(noDirectory.status != 0 && noDirectory.error.contains("Cannot reach"), "\(noDirectory.error)")
        let notJSON = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("notjson")])
        #expect(notJSON.status != 0 && notJSON.error.contains("it is not JSON"), "\(notJSON.error)")
        let noFiles = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("nofiles")])
        #expect(noFiles.status != 0 && noFiles.error.contains("it lists no files"), "\(noFiles.error)")
        #expect(try listed().isEmpty)
        #expect(!files().contains { !$0.hasPrefix(".parla-partial") }, "\(files())")
    }

    /// A mirror on the file system (a directory, or file://) is a catalog too.
    @Test func aDirectoryIsAMirror() throws {
        let r = try parla(["voices", "install", VoiceMirror.tiny], ["PARLA_VOICE_CATALOG": mirror.directory.path])
        #expect(r.status == 0, "\(r.error)")
        #expect(try listed() == ["piper.\(VoiceMirror.tiny)"])
    }

    @Test func aFullDiskLeavesNothing() throws {
        // A 2 MB file system of the test's own (a mount namespace) for a 3 MB voice.
        let parlaPath = URL(fileURLWithPath: CLITests.binary).resolvingSymlinksInPath().path
        let script = """
            mount -t tmpfs -o size=2m tmpfs '\(data.path)' && mkdir -p '\(voices.path)' && \
            '\(parlaPath)' voices install \(VoiceMirror.tiny) --catalog '\(mirror.url())'; s=$?; ls -A '\(voices.path)'; exit $s
            """
        let r = try runProcess(
            "/usr/bin/unshare", unshareMountArguments + ["/bin/sh", "-c", script],
            environment: ["XDG_DATA_HOME": data.path, "PARLA_PIPER_VOICES": nil, "LANG": "C.UTF-8"])
        #expect(r.status != 0)
        #expect(r.error.contains("Not enough space in \(voices.path)") && r.error.contains("Free some space"), "\(r.error)")
        #expect(r.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "left in the voice directory: \(r.output)")
    }

    @Test func twoInstallsOfOneVoiceAtOnce() throws {
        let first = Process()
        first.executableURL = URL(fileURLWithPath: CLITests.binary)
        first.arguments = ["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url("slow")]
        var env = ProcessInfo.processInfo.environment
        env["XDG_DATA_HOME"] = data.path
        env.removeValue(forKey: "PARLA_PIPER_VOICES")
        first.environment = env
        first.standardError = FileHandle.nullDevice
        first.standardOutput = FileHandle.nullDevice
        try first.run()
        // Once the first is fetching the model, a second is turned away.
        for _ in 0..<200 where !files().contains(where: { $0.hasSuffix("\(VoiceMirror.tiny).onnx.part") }) { usleep(20_000) }
        let second = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url()])
        #expect(second.status != 0 && second.error.contains("is installing \(VoiceMirror.tiny) now"), "\(second.error)")
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        #expect(try listed() == ["piper.\(VoiceMirror.tiny)"])
    }

    @Test func removeTakesOnlyWhatItInstalled() throws {
        let notThere = try parla(["voices", "remove", VoiceMirror.tiny])
        #expect(notThere.status != 0 && notThere.error.contains("is not installed in \(voices.path)"), "\(notThere.error)")
        // joe, given through PARLA_PIPER_VOICES, is not Parla's to remove.
        let elsewhere = try parla(["voices", "remove", VoiceMirror.joe], ["PARLA_PIPER_VOICES": PiperFixture.voiceDirectory])
        #expect(elsewhere.status != 0 && elsewhere.error.contains("which 'parla voices install' did not write to"), "\(elsewhere.error)")
        #expect(FileManager.default.fileExists(atPath: PiperFixture.model))
        let installed = try parla(["voices", "install", VoiceMirror.tiny, "--catalog", mirror.url()])
        #expect(installed.status == 0, "\(installed.error)")
        let removed = try parla(["voices", "remove", "piper.\(VoiceMirror.tiny)"])
        #expect(removed.status == 0 && removed.output.contains("Removed piper.\(VoiceMirror.tiny)"), "\(removed.error)")
        #expect(files().isEmpty, "\(files())")
        #expect(try listed().isEmpty)
    }

    /// --system: the installed prefix's share/parla/voices (here a copy of parla in PREFIX/bin).
    @Test func systemInstallsBesideTheProgram() throws {
        let prefix = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(prefix) }
        let bin = prefix.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let copy = bin.appendingPathComponent("parla").path
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: CLITests.binary).resolvingSymlinksInPath().path, toPath: copy)
        let env: [String: String?] = ["XDG_DATA_HOME": data.path, "PARLA_PIPER_VOICES": nil, "LANG": "C.UTF-8"]
        let installed = try runProcess(copy, ["voices", "install", "--system", VoiceMirror.tiny, "--catalog", mirror.url()], environment: env)
        #expect(installed.status == 0, "\(installed.error)")
        let system = prefix.appendingPathComponent("share/parla/voices")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: system.path)) ?? []).sorted()
        #expect(names == ["\(VoiceMirror.tiny).MODEL_CARD", "\(VoiceMirror.tiny).onnx", "\(VoiceMirror.tiny).onnx.json"], "\(names)")
        #expect(files().isEmpty, "nothing in the user's directory: \(files())")
        let mine = try runProcess(copy, ["voices", "remove", VoiceMirror.tiny], environment: env)
        #expect(mine.status != 0 && mine.error.contains("is not installed in \(voices.path)"), "\(mine.error)")
        let removed = try runProcess(copy, ["voices", "remove", "--system", VoiceMirror.tiny], environment: env)
        #expect(removed.status == 0, "\(removed.error)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: system.path)) ?? []).isEmpty)
    }

    /// A Piper voice that cannot be used is listed as such, with the reason, and asking for it
    /// says why instead of "no such voice".
    @Test func unusableVoicesAreListedWithTheReason() throws {
        try FileManager.default.createDirectory(at: voices, withIntermediateDirectories: true)
        try Data("{ not json".utf8).write(to: voices.appendingPathComponent("broken.onnx.json"))
        try Data([0]).write(to: voices.appendingPathComponent("broken.onnx"))
        try Data([0]).write(to: voices.appendingPathComponent("lonely.onnx"))
        let config = try String(contentsOfFile: PiperFixture.model + ".json", encoding: .utf8)
            .replacingOccurrences(of: "\"phoneme_type\": \"espeak\"", with: "\"phoneme_type\": \"text\"")
        #expect(config.contains("\"text\""))
        try config.write(to: voices.appendingPathComponent("text.onnx.json"), atomically: true, encoding: .utf8)
        try Data([0]).write(to: voices.appendingPathComponent("text.onnx"))
        let r = try parla(["voices"])
        #expect(r.status == 0, "\(r.error)")
        #expect(r.error.contains("piper.broken cannot be used: \(voices.path)/broken.onnx.json: it is not valid JSON"), "\(r.error)")
        #expect(r.error.contains("piper.lonely cannot be used") && r.error.contains("lonely.onnx.json is missing"), "\(r.error)")
        #expect(r.error.contains("piper.text cannot be used") && r.error.contains("not espeak-ng's"), "\(r.error)")
        let json = try parla(["voices", "--json"])
        let all = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]] ?? []
        let unusable = all.filter { $0["usable"] as? Bool == false }
        #expect(unusable.compactMap { $0["identifier"] as? String }.sorted() == ["piper.broken", "piper.lonely", "piper.text"], "\(json.output)")
        #expect(unusable.allSatisfy { ($0["unusable_because"] as? String)?.isEmpty == false })
        let said = try parla(["say", "-v", "piper.broken", "-o", data.appendingPathComponent("x.wav").path, "Hello"])
        #expect(said.status != 0 && said.error.contains("broken.onnx.json' is invalid: it is not valid JSON"), "\(said.error)")
    }
}
