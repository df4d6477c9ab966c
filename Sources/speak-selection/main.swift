import ParlaCommands

// `speak-selection`: speak the selected text, or stop the one speaking. See `--help`.
await runAsRoot(SpeakSelectionCommand.self)
