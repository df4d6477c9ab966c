import ArgumentParser
import Parla
import ParlaESpeak

/// `parla voices`: list the voice catalog.
struct Voices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the voices Parla can use: identifier, engine, quality, rate, streaming, name, languages, gender.",
        discussion: """
            Add your own presets as JSON files in ~/.config/parla/voices (see README.md). Piper's neural \
            voices (MODEL.onnx with MODEL.onnx.json beside it) are found in $PARLA_PIPER_VOICES, \
            ~/.local/share/parla/voices ($XDG_DATA_HOME) and /usr/share/parla/voices ($XDG_DATA_DIRS), \
            and are named piper.MODEL; one is the default for its language. STREAM says whether a voice \
            is heard as its audio is made ("yes"), or a Piper voice whose model does not split at its \
            decoder is made a whole sentence at a time ("whole"; --json gives the reason).
            """
    )

    @Option(
        name: [.customShort("l"), .customLong("language")],
        help: ArgumentHelp("Only voices that speak this language (BCP 47, e.g. en, pt-BR).", valueName: "tag"))
    var language: String?

    @Flag(help: "Print JSON (an array of voice objects).")
    var json = false

    @OptionGroup var catalogOptions: CatalogOptions

    func run() throws {
        let catalog = try catalogOptions.load()
        var voices = catalog.voices
        if let language {
            let tag = try LanguageTag(parsing: language)
            voices = catalog.voices(speaking: tag)
            if voices.isEmpty {
                // A less specific match (en-AU → en voices) is still useful; none at all is an error.
                voices = catalog.voices(speaking: LanguageTag(tag.language) ?? tag)
            }
            guard !voices.isEmpty else { throw ParlaError.noVoiceForLanguage(tag) }
        }
        if json {
            var out = "["
            for (i, v) in voices.enumerated() {
                out += i == 0 ? "\n  " : ",\n  "
                out += "{\"identifier\": \(JSONText.quoted(v.identifier)), \"name\": \(JSONText.quoted(v.name)), \"languages\": ["
                out += v.languages.map { JSONText.quoted($0.identifier) }.joined(separator: ", ")
                out += "], \"gender\": " + (v.gender.map { JSONText.quoted($0.rawValue) } ?? "null")
                out += ", \"engine\": \(JSONText.quoted(v.engine)), \"quality\": " + (v.quality.map { JSONText.quoted($0) } ?? "null")
                out += ", \"sample_rate\": " + (v.sampleRate.map(String.init) ?? "null")
                switch v.piperDecoding() {
                case .wholeSentences(let reason)?, .unreadable(let reason)?:
                    out += ", \"streams\": false, \"whole_sentences_because\": \(JSONText.quoted(reason))}"
                default: out += ", \"streams\": true}"
                }
            }
            print(out + (voices.isEmpty ? "]" : "\n]"))
            return
        }
        let idWidth = max(10, voices.map(\.identifier.count).max() ?? 0)
        let nameWidth = max(4, voices.map(\.name.count).max() ?? 0)
        print(pad("IDENTIFIER", idWidth) + "  ENGINE     QUALITY  RATE   STREAM  " + pad("NAME", nameWidth) + "  GENDER  LANGUAGES")
        for v in voices {
            let stream: String
            switch v.piperDecoding() {
            case .wholeSentences?: stream = "whole"
            case .unreadable?: stream = "?"
            default: stream = "yes"
            }
            print(
                pad(v.identifier, idWidth) + "  " + pad(v.engine, 9) + "  " + pad(v.quality ?? "-", 7) + "  "
                    + pad(v.sampleRate.map(String.init) ?? "22050", 5) + "  " + pad(stream, 6) + "  " + pad(v.name, nameWidth) + "  "
                    + pad(v.gender?.rawValue ?? "-", 6) + "  " + v.languages.map(\.identifier).joined(separator: ", "))
        }
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
}
