import Foundation

/// The real Piper voice the tests speak with: en_US-joe-medium, and ONNX Runtime, both put in
/// `~/.cache/parla` ($XDG_CACHE_HOME) by scripts/setup from their PyPI wheels.
public enum PiperFixture {
    /// The cache scripts/setup fills.
    public static var cache: String {
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/parla" }
        return (env["HOME"] ?? NSHomeDirectory()) + "/.cache/parla"
    }

    /// The directory holding the joe voice.
    public static var voiceDirectory: String { cache + "/piper-voices" }
    /// The joe voice's model.
    public static var model: String { voiceDirectory + "/en_US-joe-medium.onnx" }
    /// Its identifier in Parla.
    public static let voice = "piper.en_US-joe-medium"
    /// ONNX Runtime's library.
    public static var runtime: String { cache + "/onnxruntime/libonnxruntime.so.1" }

    /// Why the fixture cannot be used, nil if it can: the tests that need it fail with this
    /// (they are not skipped: CI runs scripts/setup, which provides it).
    public static var missing: String? {
        for path in [model, model + ".json", runtime] where !FileManager.default.fileExists(atPath: path) {
            return "\(path) is missing: run scripts/setup (it fetches ONNX Runtime and the joe voice from PyPI)"
        }
        return nil
    }

    /// A directory with a copy of the joe voice under `name` whose model bytes and config text
    /// have been passed through `model` and `config` (for the tests of broken voices).
    public static func alteredVoice(
        named name: String, model alterModel: (Data) -> Data = { $0 }, config alterConfig: (String) -> String = { $0 }
    ) throws -> URL {
        let dir = try makeTemporaryDirectory()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: model))
        try alterModel(bytes).write(to: dir.appendingPathComponent(name + ".onnx"))
        let config = try String(contentsOfFile: model + ".json", encoding: .utf8)
        try alterConfig(config).write(to: dir.appendingPathComponent(name + ".onnx.json"), atomically: true, encoding: .utf8)
        return dir
    }

    /// Removes a voice `alteredVoice` made, and the prepared copies of it that loading it left
    /// in the Piper cache ($PARLA_PIPER_CACHE, else the cache's piper-models): each is a copy of
    /// the 63 MB model, named after the voice.
    public static func removeAlteredVoice(_ dir: URL) {
        let fm = FileManager.default
        let names = ((try? fm.contentsOfDirectory(atPath: dir.path)) ?? []).filter { $0.hasSuffix(".onnx") }.map { String($0.dropLast(5)) }
        removeTemporaryDirectory(dir)
        let explicit = ProcessInfo.processInfo.environment["PARLA_PIPER_CACHE"]
        if explicit == "0" { return }
        let prepared = explicit.flatMap { $0.isEmpty ? nil : $0 } ?? cache + "/piper-models"
        for file in (try? fm.contentsOfDirectory(atPath: prepared)) ?? [] where names.contains(where: { file.hasPrefix($0 + "-") }) {
            try? fm.removeItem(atPath: prepared + "/" + file)
        }
    }
}
