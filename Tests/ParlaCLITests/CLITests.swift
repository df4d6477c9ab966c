import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Testing
import ParlaAudioTestSupport

/// Runs the built `parla` executable, as a user would.
@Suite("parla command line", .serialized)
struct CLITests {
    /// The `parla` binary next to the test bundle (override with PARLA_BIN).
    static let binary: String = {
        if let env = ProcessInfo.processInfo.environment["PARLA_BIN"] { return env }
        var dir = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent("parla").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/parla").path
    }()

    /// Runs parla with no language preferences in the environment, so results do not depend on
    /// the locale of the machine running the tests.
    func parla(_ args: [String], stdin: Data? = nil, environment: [String: String?] = [:]) throws -> ProcessResult {
        var env: [String: String?] = ["LANG": "C.UTF-8", "LANGUAGE": nil, "LC_ALL": nil, "LC_MESSAGES": nil]
        env.merge(environment) { $1 }
        return try runProcess(Self.binary, args, stdin: stdin, environment: env)
    }

    @Test func sayWritesWAVAndTimings() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let wav = dir.appendingPathComponent("hello.wav").path
        let json = dir.appendingPathComponent("hello.json").path
        let r = try parla(["say", "Hello world", "-o", wav, "--timings", json, "-r", "200", "-p", "60", "-a", "80"])
        #expect(r.status == 0, "\(r.error)")
        let t = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as! [String: Any]
        let words = t["words"] as! [[String: Any]]
        #expect(words.map { $0["word"] as! String } == ["Hello", "world"])
        #expect(words.map { $0["start"] as! Int } == [0, 6])
        #expect(words.map { $0["end"] as! Int } == [5, 11])
        let segments = t["segments"] as! [[String: Any]]
        #expect(segments.first?["voice"] as? String == "espeak-ng.en-us")
        #expect(try FileManager.default.attributesOfItem(atPath: wav)[.size] as! Int > 44)
    }

    @Test func textFromFileAndStandardInput() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("in.txt")
        try Data("Bonjour à tous".utf8).write(to: input)
        let a = try parla(["say", "-f", input.path, "-l", "fr", "-o", dir.appendingPathComponent("a.wav").path, "--timings", "-"])
        #expect(a.status == 0, "\(a.error)")
        #expect(a.output.contains("\"language\": \"fr\""))
        #expect(a.output.contains("\"word\": \"à\""))
        let b = try parla(["say", "-o", dir.appendingPathComponent("b.wav").path, "-"], stdin: Data("Guten Tag".utf8))
        #expect(b.status == 0, "\(b.error)")
        let c = try parla(["say", "--ssml", "-f", "-", "-o", dir.appendingPathComponent("c.wav").path],
                          stdin: Data(#"<speak>Hi <voice xml:lang="el">Γειά</voice></speak>"#.utf8))
        #expect(c.status == 0, "\(c.error)")
        #expect(c.error.contains("languages: en, el"))
    }

    @Test func voicesListsTheCatalog() throws {
        let all = try parla(["voices", "--json"])
        #expect(all.status == 0)
        let list = try JSONSerialization.jsonObject(with: Data(all.output.utf8)) as! [[String: Any]]
        #expect(list.count > 100)
        #expect(list.contains { $0["identifier"] as? String == "espeak-ng.el" && ($0["languages"] as? [String])?.contains("el") == true })
        let greek = try parla(["voices", "--language", "el"])
        #expect(greek.status == 0)
        #expect(greek.output.contains("espeak-ng.el"))
        #expect(!greek.output.contains("espeak-ng.en-us"))
        #expect(greek.output.hasPrefix("IDENTIFIER"))
    }

    @Test(arguments: [
        (["say", "hi", "-v", "espeak-ng.nope"], "parla voices"),
        (["say", "hi", "-l", "xx"], "No voice speaks language 'xx'"),
        (["say", "hi", "-l", "en_US!"], "not a BCP 47 language tag"),
        (["say", "--ssml", "<speak>unclosed"], "Invalid SSML at line 1"),
        (["say", "-f", "/nonexistent/in.txt"], "Cannot read '/nonexistent/in.txt'"),
        (["say", "   "], "nothing to say"),
        (["say", "hi", "-r", "5"], "out of range"),
        (["voices", "--language", "xx"], "No voice speaks language 'xx'"),
        (["voices", "--language", "!!"], "not a BCP 47"),
    ])
    func badInputFailsClearlyAndWritesNothing(args: [String], message: String) throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        var full = args
        if args.first == "say" { full += ["-o", dir.appendingPathComponent("out.wav").path] }
        let r = try parla(full)
        #expect(r.status != 0)
        #expect(r.error.lowercased().contains(message.lowercased()), "stderr was: \(r.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func invalidUTF8IsReportedWithItsByteOffset() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let input = dir.appendingPathComponent("bad.txt")
        try Data([0x48, 0x69, 0x20, 0xC3, 0x28, 0x21]).write(to: input)
        let r = try parla(["say", "-f", input.path, "-o", dir.appendingPathComponent("out.wav").path])
        #expect(r.status != 0)
        #expect(r.error.contains("offset 3"), "stderr was: \(r.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["bad.txt"])
    }

    @Test func unwritableOutputFailsWithoutLeftovers() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let r = try parla(["say", "hi", "-o", dir.appendingPathComponent("missing/out.wav").path])
        #expect(r.status != 0)
        #expect(r.error.contains("Cannot write"), "stderr was: \(r.error)")
        let d = try parla(["say", "hi", "-o", dir.path])
        #expect(d.status != 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    /// Starts `parla say -f long.txt -o long.wav` in `dir` on a text that takes seconds to
    /// render, with `environment` changed, without waiting for it.
    func startLongRender(in dir: URL, environment: [String: String?] = [:]) throws -> Process {
        let input = dir.appendingPathComponent("long.txt")
        try Data(String(repeating: "A long text that takes a while to render. ", count: 3000).utf8).write(to: input)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = ["say", "-f", input.path, "-o", dir.appendingPathComponent("long.wav").path]
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    @Test func interruptLeavesNoPartialFile() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let p = try startLongRender(in: dir)
        // Once its Ctrl-C handling is in place (before that, SIGINT simply ends it, with no file
        // begun), and a moment into the rendering.
        #expect(waitUntilHandling(SIGINT, pid: p.processIdentifier))
        #expect(waitUntilWorking(pid: p.processIdentifier))
        p.interrupt()
        #expect(waitForExit(p) == 130)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["long.txt"])
    }

    /// `parla say` forks its engine host before main (CParlaPrestart), so espeak-ng loads while
    /// the command line and catalog are read: the host is then this very program, not the
    /// `parla-engine` it starts otherwise (PARLA_NO_PRESTART=1).
    @Test(arguments: [false, true])
    func sayStartsItsEngineHostBeforeMain(disabled: Bool) throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let p = try startLongRender(in: dir, environment: ["PARLA_ENGINE": nil, "PARLA_NO_PRESTART": disabled ? "1" : nil])
        defer { p.interrupt(); _ = waitForExit(p) }
        // The child processes and their programs, once two reads 100 ms apart agree (a child
        // that posix_spawn has made but not yet exec'd shows this program for a moment).
        func children() -> [String] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(p.processIdentifier)/task")) ?? []
            let pids = tasks.flatMap { task in
                ((try? String(contentsOfFile: "/proc/\(p.processIdentifier)/task/\(task)/children", encoding: .utf8)) ?? "")
                    .split(separator: " ").map(String.init)
            }
            return pids.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0)/exe") }.sorted()
        }
        var hosts: [String] = []
        for _ in 0..<50 {
            Thread.sleep(forTimeInterval: 0.1)
            let now = children()
            if !now.isEmpty && now == hosts { break }
            hosts = now
        }
        let program = URL(fileURLWithPath: Self.binary).resolvingSymlinksInPath().path
        #expect(hosts.count == 1, "engine hosts: \(hosts)")
        if disabled {
            #expect(hosts.allSatisfy { $0.hasSuffix("/parla-engine") }, "\(hosts)")
        } else {
            #expect(hosts == [program])
        }
    }

    /// A program that merely inherits a helper role (from an environment saved elsewhere, or
    /// a grandparent) runs as itself: only the process Parla started takes the role.
    @Test(arguments: [["PARLA_RENDER_WORKER": "1"], ["PARLA_RENDER_WORKER": "1:1"], ["PARLA_ENGINE_HOST": "1:1"]])
    func inheritedHelperRolesAreIgnored(environment: [String: String]) throws {
        let r = try parla(["--version"], stdin: Data(), environment: environment)
        #expect(r.status == 0, "\(environment): \(r.error)")
        #expect(!r.output.isEmpty)
    }

    /// Without a `parla-engine` (PARLA_ENGINE=self), the program starts itself again as its
    /// engine host, and speaks the same.
    @Test func theProgramCanBeItsOwnEngineHost() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let own = dir.appendingPathComponent("own.wav"), helper = dir.appendingPathComponent("helper.wav")
        let a = try parla(["say", "-o", own.path, "Hello there."], environment: ["PARLA_ENGINE": "self"])
        let b = try parla(["say", "-o", helper.path, "Hello there."], environment: ["PARLA_NO_PRESTART": "1"])
        #expect(a.status == 0 && b.status == 0, "\(a.error) \(b.error)")
        #expect(try Data(contentsOf: own) == Data(contentsOf: helper))
    }

    @Test func helpIsComplete() throws {
        let r = try parla(["say", "--help"])
        for option in ["--file", "--output", "--timings", "--voice", "--language", "--rate", "--pitch", "--volume", "--punctuation", "--ssml", "--voices"] {
            #expect(r.output.contains(option), "say --help lacks \(option)")
        }
    }

    /// Commands that need no sound server never connect to one: espeak-ng's own audio output
    /// is kept from opening (it connected at every start) and only live speech connects.
    /// PULSE_SERVER points at a socket of the test's: any connection would wait in its backlog.
    @Test func fileCommandsNeverConnectToTheSoundServer() async throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let path = dir.appendingPathComponent("native").path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (i, b) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[i] = b }
        }
        let bound = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(fd, 16) == 0)
        let tsv = dir.appendingPathComponent("in.tsv")
        try "a\tHello world\nb\tfr\tBonjour\n".write(to: tsv, atomically: true, encoding: .utf8)
        let env: [String: String?] = ["PULSE_SERVER": "unix:" + path, "LANG": "C.UTF-8"]
        for args in [
            ["say", "-o", dir.appendingPathComponent("h.wav").path, "--timings", "-", "Hello, Καλημέρα"],
            ["render", tsv.path, "-o", dir.appendingPathComponent("out").path, "--timings"],
            ["detect", "Hello, Καλημέρα"],
            ["voices", "--language", "el"],
        ] {
            let r = try await offPool { try runProcess(Self.binary, args, environment: env) }
            #expect(r.status == 0, "\(args[0]): \(r.error)")
            let client = accept(fd, nil, nil)
            #expect(client < 0 && errno == EAGAIN, "parla \(args[0]) connected to the sound server")
            if client >= 0 { close(client) }
        }
    }

    /// With libpulse missing (hidden here in a mount namespace of the test's own), files are
    /// still written, and live speech fails naming the package to install. (Linked, its
    /// absence stopped every command before it began.)
    @Test func withoutLibpulseFilesAreStillWrittenAndSpeechSaysWhatToInstall() throws {
        let candidates = ["/usr/lib/x86_64-linux-gnu/libpulse.so.0", "/usr/lib/aarch64-linux-gnu/libpulse.so.0"]
        guard let link = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }),
            let library = realpath(link, nil).map({ path in defer { free(path) }; return String(cString: path) })
        else {
            Issue.record("libpulse.so.0 not found in \(candidates)")
            return
        }
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let wav = dir.appendingPathComponent("h.wav").path
        let parla = URL(fileURLWithPath: Self.binary).resolvingSymlinksInPath().path
        let script = "mount --bind /dev/null '\(library)' && '\(parla)' say -o '\(wav)' Hello && exec '\(parla)' say Hello"
        let r = try runProcess("/usr/bin/unshare", unshareMountArguments + ["/bin/sh", "-c", script], environment: ["LANG": "C.UTF-8"])
        #expect(r.status == 1, "\(r.error)")
        #expect(r.error.contains("Wrote \(wav)"), "\(r.error)")
        #expect(try FileManager.default.attributesOfItem(atPath: wav)[.size] as! Int > 44)
        #expect(r.error.contains("install the libpulse0 package"), "\(r.error)")
    }

    /// A program without Parla's stand-in for pcaudiolib beside it (an app that depends on the
    /// Parla package, here a copy of `parla` in a directory of its own) loads the real
    /// pcaudiolib with libespeak-ng, whose initialisation probes the sound server. Parla's
    /// helpers are started with the servers out of reach, so the engine host (`say -o`) and
    /// the render workers (`render`) never connect to the server the user's environment names.
    @Test func helpersNeverConnectToTheSoundServer() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let copy = dir.appendingPathComponent("parla").path
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: Self.binary).resolvingSymlinksInPath().path, toPath: copy)
        // A socket that only counts who connects to it: a sound server that never answers.
        let socketPath = dir.appendingPathComponent("pulse.sock").path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in socketPath.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0 && listen(listener, 16) == 0)
        let tsv = dir.appendingPathComponent("in.tsv")
        try "a\tHello world\nb\tfr\tBonjour\n".write(to: tsv, atomically: true, encoding: .utf8)
        let env: [String: String?] = ["LANG": "C.UTF-8", "PULSE_SERVER": "unix:\(socketPath)"]
        let said = try runProcess(copy, ["say", "-o", dir.appendingPathComponent("h.wav").path, "Hello, Καλημέρα"], environment: env)
        #expect(said.status == 0, "\(said.error)")
        let rendered = try runProcess(copy, ["render", tsv.path, "-o", dir.appendingPathComponent("out").path], environment: env)
        #expect(rendered.status == 0, "\(rendered.error)")
        var connections = 0
        while case let fd = accept(listener, nil, nil), fd >= 0 {
            connections += 1
            close(fd)
        }
        #expect(connections == 0, "\(connections) connections to the sound server named by PULSE_SERVER")
    }

    /// Parla's programs link neither libpulse, libespeak-ng nor libdbus-1 but load each on
    /// first use (scripts/generate-lazy-libraries.py), and the engine host meets
    /// libespeak-ng's need for pcaudiolib with Parla's stand-in (CParlaAudioNull): writing a
    /// file maps no sound library at all, in this process, its engine host or its workers.
    @Test func fileCommandsLoadNoSoundLibrary() throws {
        let dir = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let tsv = dir.appendingPathComponent("in.tsv")
        try "a\tHello world\nb\tfr\tBonjour\n".write(to: tsv, atomically: true, encoding: .utf8)
        // LD_DEBUG=files has the dynamic loader of every process report what it maps, on
        // standard error (PARLA_ENGINE_DEBUG keeps the engine host's).
        let env: [String: String?] = ["LD_DEBUG": "files", "PARLA_ENGINE_DEBUG": "1"]
        for args in [
            ["say", "-o", dir.appendingPathComponent("h.wav").path, "Hello, Καλημέρα"],
            ["render", tsv.path, "-o", dir.appendingPathComponent("out").path],
            ["detect", "Hello, Καλημέρα"],
            ["--version"],
        ] {
            let r = try parla(args, environment: env)
            #expect(r.status == 0, "\(args[0]): \(r.error.suffix(2000))")
            let mapped = r.error.split(separator: "\n").filter { $0.contains("generating link map") }
            for library in ["libpulse", "libasound", "libsndfile", "libdbus-1", "libX11"] {
                #expect(!mapped.contains { $0.contains(library) }, "parla \(args[0]) mapped \(library)")
            }
            let engine = mapped.contains { $0.contains("libespeak-ng.so") }
            #expect(engine == (args[0] == "say" || args[0] == "render"), "parla \(args[0]): libespeak-ng mapped: \(engine)")
        }
    }
}
