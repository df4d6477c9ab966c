import ParlaCommands

// `parla`: every subcommand lives in ParlaCommands, shared with `speak-selection`.
await runAsRoot(ParlaCommand.self)
