#!/usr/bin/env python3
"""A GTK window whose button starts a (fake) download: its progress is announced politely,
"Download finished" at high priority, and the word being heard is highlighted in a label.

Needs PyGObject with GTK 3 (Debian: python3-gi gir1.2-gtk-3.0) and the parla package.
`--auto` clicks the button itself and quits once "Download finished" has been heard (the
tests run it so, on a private display).
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

import parla  # noqa: E402


class DownloadWindow(Gtk.Window):
    def __init__(self, synth: parla.Synthesizer, auto: bool) -> None:
        super().__init__(title="Parla: download")
        self.synth = synth
        self.auto = auto
        self.texts: dict[int, str] = {}
        self.finished: int = -1
        self.set_default_size(420, 140)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8, margin=12)
        self.button = Gtk.Button(label="Download")
        self.button.connect("clicked", self.start)
        self.progress = Gtk.ProgressBar()
        self.spoken = Gtk.Label(label="")
        self.spoken.set_line_wrap(True)
        for widget in (self.button, self.progress, self.spoken):
            box.pack_start(widget, False, False, 0)
        self.add(box)
        # Events come on Parla's thread: the window is updated on GTK's.
        synth.on_event(lambda event: GLib.idle_add(self.on_event, event))

    def say(self, text: str, priority: str, queue: bool) -> None:
        announcement = self.synth.announce(text, priority=priority, queue=queue)
        self.texts[announcement.utterance] = text
        if text == "Download finished":
            self.finished = announcement.utterance

    def start(self, _button: Gtk.Button) -> None:
        self.button.set_sensitive(False)
        self.percent = 0
        GLib.timeout_add(400, self.step)

    def step(self) -> bool:
        self.percent += 25
        self.progress.set_fraction(self.percent / 100)
        if self.percent < 100:
            # Polite: waits its turn, and gives way to everything else.
            self.say(f"{self.percent} percent", priority="low", queue=True)
            return True
        self.say("Download finished", priority="high", queue=False)
        self.button.set_sensitive(True)
        return False

    def on_event(self, event: parla.Event) -> bool:
        text = self.texts.get(event.utterance)
        if event.kind == "word" and text is not None:
            before, word, after = text[: event.start], text[event.start : event.end], text[event.end :]
            escape = GLib.markup_escape_text
            self.spoken.set_markup(f"{escape(before)}<b><u>{escape(word)}</u></b>{escape(after)}")
            print(f"highlighted: {word}", flush=True)
        if event.utterance == self.finished and event.is_terminal:
            print(f"Download finished: {event.kind}", flush=True)
            if self.auto:
                Gtk.main_quit()
        return False


def main() -> int:
    auto = "--auto" in sys.argv
    with parla.Synthesizer() as synth:
        window = DownloadWindow(synth, auto)
        window.connect("destroy", Gtk.main_quit)
        window.show_all()
        if auto:
            GLib.timeout_add(300, lambda: window.button.clicked() and False)
            GLib.timeout_add_seconds(60, Gtk.main_quit)  # never hang a test
        Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
