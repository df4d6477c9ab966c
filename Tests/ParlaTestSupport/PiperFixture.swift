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
}
