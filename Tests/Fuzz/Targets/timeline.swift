// libFuzzer entry for the timeline builder fed hostile engine events (built by scripts/fuzz
// with ParlaCore's sources).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTimeline(_ data: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let problem = FuzzChecks.timeline(bytes) { fatalError("timeline: \(problem)") }
    return 0
}
