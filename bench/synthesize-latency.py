"""scripts/bench-spiel, with a Piper voice: parla.Synthesizer.synthesize (libparla's
parla_synthesize, a file's audio) against synthesize(for_playback=True)
(parla_synthesize_for_playback, what the Spiel provider streams), the voice warm: call → first
audio chunk of a 38-word sentence and of an Orca-style focus message, alternating.
  python synthesize-latency.py RUNS VOICE"""

import statistics
import sys
import time

import parla

RUNS = int(sys.argv[1])
VOICE = sys.argv[2]
TEXTS = {
    "38 words": "Screen reader users choose a voice by how fast it answers, so the natural voice now makes its audio a little at a "
    "time and plays the first part while it is still working on the rest of this long sentence.",
    "focus message": "Bravo push button.",
}

synth = parla.Synthesizer()
for _ in synth.synthesize("Warm up.", voice=VOICE, for_playback=True):
    pass
for name, text in TEXTS.items():
    times = {False: [], True: []}
    for _ in range(RUNS):
        for playback in (False, True):
            t0 = time.monotonic()
            for chunk in synth.synthesize(text, voice=VOICE, for_playback=playback):
                if chunk.kind == "audio":
                    times[playback].append((time.monotonic() - t0) * 1000)
                    break
            time.sleep(0.3)
    file, played = statistics.median(times[False]), statistics.median(times[True])
    print(f"  {VOICE}, {name}: call → first audio chunk, parla_synthesize {file:.1f} ms, for playback {played:.1f} ms "
          f"({played / file:.2f}×), medians of {RUNS}")
