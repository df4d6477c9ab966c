"""scripts/bench-c: how many events per second the parla package delivers to a Python callback,
and whether they keep up with the audio: each event's lag is the time its callback ran minus
the moment it describes (when its word is heard). A fast reading (rate 4, one-letter words)
makes the most events a listener could get."""

import time

import parla

WORDS = " ".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(400)) + "."

with parla.Synthesizer() as synth:
    synth.prepare()
    synth.wait(synth.speak("Warm up."))
    lags = []
    times = []

    def on_event(event: parla.Event) -> None:
        if event.kind == "word":
            now = time.monotonic()
            lags.append((now - event.time) * 1000)
            times.append(now)

    synth.on_event(on_event)
    ident = synth.speak(WORDS, rate=4.0, language="en")
    how = synth.wait(ident, timeout=120)
    ordered = list(lags)
    lags.sort()
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    print(f"Python events: {len(times)} word events in {span:.2f} s of speech ({how}): {len(times) / span:.1f} events/s")

    def at(values: list, q: float) -> float:
        return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]

    print(f"lag from the moment described to the Python callback: median {at(lags, 0.5):.2f} ms, p95 {at(lags, 0.95):.2f} ms, max {lags[-1]:.2f} ms")
    # Falling behind would show as lag growing through the reading.
    third = max(1, len(ordered) // 3)
    first, last = sorted(ordered[:third]), sorted(ordered[-third:])
    print(f"median lag, first third of the reading: {at(first, 0.5):.2f} ms; last third: {at(last, 0.5):.2f} ms")
