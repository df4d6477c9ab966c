import ArgumentParser
import ParlaPulseAudio
import Testing

@testable import ParlaCommands

/// `QuickStart` parses `parla say …` and a bare `speak-selection` with their own command's
/// parser rather than the whole tree's (see `runAsRoot`): every command line it takes must
/// mean what the root parser makes of it, and every other one must go to the root parser.
@Suite("command lines parsed by their own command")
struct QuickStartTests {
    /// What a parsed command holds, as text (its options' values), to compare two parses.
    static func values(_ command: Any) -> String { String(reflecting: command) }

    /// What the root parser makes of `line` (the arguments after the program).
    static func parsed(parla line: [String]) throws -> String? {
        switch try ParlaCommand.parseAsRoot(line) {
        case let say as Say: return values(say)
        case let selection as SelectionCommand: return values(selection.options)
        default: return nil
        }
    }

    static func values(_ quick: QuickStart) -> String {
        switch quick {
        case .say(let say): values(say)
        case .selection(let options): values(options)
        }
    }

    @Test(arguments: [
        ["say", "Hello"], ["say", "Hello", "world."], ["say", "help"], ["say", "say", "render"], ["say", ""],
        ["say", "Καλημέρα", "مرحبا", "👍🏽"], ["say", "a=b", "x:y"], ["say", "Hello -o x.wav"], ["selection"],
        ["say", "-o", "x.wav", "Hi"], ["say", "Hi", "--output", "a b.wav"], ["say", "Hi", "-o", "x.wav", "there"],
        ["say", "-o", "a", "-o", "b", "Hi"], ["say", "--output=x.wav", "Hi"], ["say", "Hi", "--ssml"], ["say", "-"], ["say", "--", "-x"],
        ["say", "Hi", "-v", "en", "-r", "200", "--pitch", "40", "--events", "json"], ["say", "-f", "text.txt", "--no-detect"],
    ])
    func linesMeanWhatTheRootParserReads(line: [String]) throws {
        let quick = try #require(QuickStart(root: ParlaCommand.self, arguments: ["/usr/bin/parla"] + line))
        #expect(Self.values(quick) == (try Self.parsed(parla: line)))
    }

    @Test func bareSpeakSelectionIsTheParsersDefaults() throws {
        let quick = try #require(QuickStart(root: SpeakSelectionCommand.self, arguments: ["speak-selection"]))
        let command = try #require(try SpeakSelectionCommand.parseAsRoot([]) as? SpeakSelectionCommand)
        #expect(Self.values(quick) == Self.values(command.options))
    }

    @Test(arguments: [
        ["say", "Hi", "-o"], ["say", "-ox.wav", "Hi"], ["say", "Hi", "--no-such-option"], ["say", "-r", "fast", "Hi"],
        ["say", "--help"], ["say", "Hi", "--version"], ["voices"], ["detect", "Hello"], ["selection", "--stop"], ["selection", "-"],
        ["Say", "Hello"], [], ["say", "Hi", "--generate-completion-script", "bash"], ["say", "--generate-completion-script"],
    ])
    func otherLinesGoToTheRootParser(line: [String]) {
        #expect(QuickStart(root: ParlaCommand.self, arguments: ["parla"] + line) == nil)
        #expect(QuickStart(root: SpeakSelectionCommand.self, arguments: ["speak-selection"] + line + ["x"]) == nil)
    }

    @Test func linesWithoutAnOutputOptionPlayWithTheDefaults() {
        #expect(Say.playsWithDefaultOutput(["Hello", "world."]))
        #expect(Say.playsWithDefaultOutput(["-v", "en", "--highlight", "Hi", "--", "x"]))
        for line in [
            ["-o", "x.wav", "Hi"], ["Hi", "--output=x.wav"], ["Hi", "--device", "sink"], ["--latency", "50", "Hi"], ["--duck-by", "20", "Hi"],
            ["--duck", "Hi"], ["-fo", "x"], ["Hi", "--", "-o"], ["--dev=x", "Hi"],
        ] {
            #expect(!Say.playsWithDefaultOutput(line), "\(line)")
        }
    }

    /// Whatever line the quick start connects early for, and `say`'s parser takes, plays live
    /// with the default output: the connection made early is the one the command asks for.
    @Test func anEarlyConnectionIsTheOneTheCommandUses() {
        let words = [
            "Hello", "-o", "x.wav", "--output", "--output=y.wav", "--device", "sink", "--latency", "30", "50", "--duck", "--duck-by", "20",
            "-v", "en", "--highlight", "-", "--", "-r", "200", "--ipa",
        ]
        var generator = SystemRandomNumberGenerator()
        var early = 0
        for _ in 0..<400 {
            let line = (0..<Int.random(in: 1...6, using: &generator)).map { _ in words.randomElement(using: &generator)! }
            guard Say.playsWithDefaultOutput(line), let say = try? Say.parse(line) else { continue }
            early += 1
            #expect(say.output == nil && say.audioOutput == AudioOutputOptions(), "\(line)")
        }
        #expect(early > 0)
    }

    /// Random command lines of words, some of them options: whatever is taken means what the
    /// root parser reads, and whatever the root parser accepts is taken.
    @Test func randomLinesAgreeWithTheRootParser() throws {
        let words = [
            "Hello", "world", "say", "help", "-", "--", "-o", "--output", "--ssml", "x.wav", "", "Καλημέρα", "=", "-v", "selection", "voices",
            "-r", "200", "--highlight",
        ]
        var generator = SystemRandomNumberGenerator()
        var taken = 0
        for _ in 0..<500 {
            let line = ["say"] + (0..<Int.random(in: 0...5, using: &generator)).map { _ in words.randomElement(using: &generator)! }
            let root = try? Self.parsed(parla: line)
            guard let quick = QuickStart(root: ParlaCommand.self, arguments: ["parla"] + line) else {
                #expect(root == nil || line.contains("--"), "\(line): the root parser reads it, QuickStart does not")
                continue
            }
            taken += 1
            #expect(Self.values(quick) == root, "\(line)")
        }
        #expect(taken > 0)
    }
}

extension QuickStartTests {
    /// The prestart constructor's half of the same reading: the engine host is started before
    /// `main` for the commands that speak, and for no other line.
    @Test(arguments: [
        (["parla", "say", "Hi"], true), (["/usr/bin/parla", "say", "-v", "fr", "-f", "x.txt"], true),
        (["parla", "selection", "--queue"], true), (["speak-selection"], true), (["speak-selection", "--notify"], true),
        (["parla", "say", "--help"], false), (["parla", "say", "Hi", "-h"], false), (["speak-selection", "--stop"], false),
        (["parla", "selection", "--version"], false), (["parla", "render", "in.tsv"], false), (["parla"], false),
        (["parla", "voices"], false), (["sd_parla"], false), (["parla", "say", "--", "--help"], true),
        (["speak-selection", "--generate-completion-script", "bash"], false),
    ])
    func theEngineStartsBeforeMainOnlyForCommandsThatSpeak(line: [String], speaks: Bool) {
        #expect(QuickStart.speaks(line) == speaks, "\(line)")
    }
}
