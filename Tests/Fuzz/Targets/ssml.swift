// libFuzzer entry for the SSML reader (built by scripts/fuzz with ParlaCore's sources).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSSML(_ data: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let problem = FuzzChecks.ssml(bytes) { fatalError("SSML: \(problem)") }
    return 0
}
