import ArgumentParser
import Testing

@testable import ParlaCommands

/// `QuickStart` reads `parla say TEXT…` and a bare `speak-selection` without swift-argument-parser
/// (see `runAsRoot`): every command line it recognises must mean what the parser makes of it,
/// and every other one must go to the parser.
@Suite("command lines recognised without the parser")
struct QuickStartTests {
    /// What the parser makes of `line` (the arguments after the program), as a `QuickStart`.
    static func parsed(parla line: [String]) throws -> QuickStart? {
        switch try ParlaCommand.parseAsRoot(line) {
        case let say as Say: return .say(say.arguments)
        case let selection as SelectionCommand: return .selection(selection.options.arguments)
        default: return nil
        }
    }

    @Test(arguments: [
        ["say", "Hello"], ["say", "Hello", "world."], ["say", "help"], ["say", "say", "render"], ["say", ""],
        ["say", "Καλημέρα", "مرحبا", "👍🏽"], ["say", "a=b", "x:y"], ["say", "Hello -o x.wav"], ["selection"],
        ["say", "-o", "x.wav", "Hi"], ["say", "Hi", "--output", "a b.wav"], ["say", "Hi", "-o", "x.wav", "there"],
    ])
    func recognisedLinesMeanWhatTheParserReads(line: [String]) throws {
        let quick = try #require(QuickStart(root: ParlaCommand.self, arguments: ["/usr/bin/parla"] + line))
        #expect(quick == (try Self.parsed(parla: line)))
    }

    @Test func bareSpeakSelectionIsTheParsersDefaults() throws {
        let quick = try #require(QuickStart(root: SpeakSelectionCommand.self, arguments: ["speak-selection"]))
        let command = try #require(try SpeakSelectionCommand.parseAsRoot([]) as? SpeakSelectionCommand)
        #expect(quick == .selection(command.options.arguments))
    }

    @Test(arguments: [
        ["say"], ["say", "-o", "x.wav"], ["say", "Hi", "-o"], ["say", "Hi", "-o", "-"], ["say", "-o", "a", "-o", "b", "Hi"],
        ["say", "-ox.wav", "Hi"], ["say", "--output=x.wav", "Hi"], ["say", "Hi", "--ssml"], ["say", "-"], ["say", "--", "-x"], ["say", "Hi", "-v", "en"],
        ["say", "--help"], ["say", "Hi", "--version"], ["voices"], ["detect", "Hello"], ["selection", "--stop"], ["selection", "-"],
        ["Say", "Hello"], [],
    ])
    func otherLinesGoToTheParser(line: [String]) {
        #expect(QuickStart(root: ParlaCommand.self, arguments: ["parla"] + line) == nil)
        #expect(QuickStart(root: SpeakSelectionCommand.self, arguments: ["speak-selection"] + line + ["x"]) == nil)
    }

    /// Random command lines of words, some of them option-like: whatever is recognised means
    /// what the parser reads.
    @Test func randomLinesAgreeWithTheParser() throws {
        let words = [
            "Hello", "world", "say", "help", "-", "--", "-o", "--output", "--ssml", "x.wav", "", "Καλημέρα", "=", "-v", "selection", "voices",
        ]
        var generator = SystemRandomNumberGenerator()
        var recognised = 0
        for _ in 0..<2000 {
            let line = ["say"] + (0..<Int.random(in: 0...5, using: &generator)).map { _ in words.randomElement(using: &generator)! }
            guard let quick = QuickStart(root: ParlaCommand.self, arguments: ["parla"] + line) else { continue }
            recognised += 1
            #expect(quick == (try Self.parsed(parla: line)), "\(line)")
        }
        #expect(recognised > 0)
    }
}

extension QuickStartTests {
    /// The prestart constructor's half of the same table: the engine host is started before
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
