import ParlaCommands

// `parla-bench`: live-playback benchmarks at a null sink's monitor (see scripts/bench-live,
// scripts/bench-selection and scripts/bench-start). Built from source, never installed.
await runAsRoot(BenchLive.self)
