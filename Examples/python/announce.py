#!/usr/bin/env python3
"""Speaks a paragraph and prints each word as it is heard; an announcement interrupts it, and a
polite one waits its turn. Needs the parla package (the wheel, or `pip install ./python`
against an installed Parla)."""

import time

import parla

PARAGRAPH = (
    "Parla speaks text in the right language. It says which word is being heard, "
    "and an announcement can interrupt it or wait its turn."
)

with parla.Synthesizer() as synth:
    texts = {}  # each utterance's text, by id: events give ranges into it

    def on_event(event: parla.Event) -> None:
        # On Parla's event thread, as each word is heard.
        if event.kind == "word" and event.utterance in texts:
            print(f"word {event.utterance}: {texts[event.utterance][event.start:event.end]}\n", end="", flush=True)
        elif event.is_terminal:
            print(f"utterance {event.utterance} {event.kind}\n", end="", flush=True)

    synth.on_event(on_event)
    reading = synth.speak(PARAGRAPH, language="en", resume_after_interruption=True)
    texts[reading] = PARAGRAPH
    time.sleep(1.5)  # a few words in, an announcement interrupts ...
    urgent = synth.announce("Battery low.")
    texts[urgent.utterance] = urgent.text
    # ... and a polite one waits until everything before it has been said.
    later = synth.announce("Download finished.", priority="low", queue=True)
    texts[later.utterance] = later.text
    heard = later.wait(timeout=60)
    # One write, as the event thread's are: a print of several parts could be cut by its lines.
    print(f"the polite announcement was heard in full: {heard}\n", end="", flush=True)
