#!/usr/bin/env python3
"""Runs parla and espeak-ng alternately on the same file; prints median CPU time (user and
system apart), peak RSS and the ratio."""
import os
import statistics
import subprocess
import sys
import tempfile

corpus, runs = sys.argv[1], int(sys.argv[2])
tmp = tempfile.mkdtemp(prefix="parla-bench-")
commands = {
    "parla say": [".build/release/parla", "say", "-f", corpus, "-o", f"{tmp}/p.wav", "--timings", f"{tmp}/p.json"],
    "espeak-ng": ["espeak-ng", "-f", corpus, "-w", f"{tmp}/e.wav"],
}


def measure(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        sys.exit(f"command failed ({status}): {' '.join(cmd)}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime


results = {name: [] for name in commands}
for name, cmd in commands.items():
    measure(cmd)  # warm the page cache and the dictionaries
for _ in range(runs):
    for name, cmd in commands.items():
        results[name].append(measure(cmd))

size = os.path.getsize(corpus)
lines = sum(1 for _ in open(corpus, encoding="utf-8"))
audio_s = (os.path.getsize(f"{tmp}/p.wav") - 44) / 2 / 22050
print(f"corpus: {corpus} ({lines} lines, {size} bytes, {audio_s:.0f} s of audio), {runs} runs each, median")
print(f"{'command':<12} {'CPU s':>8} {'user s':>8} {'sys s':>8} {'peak MB':>8}")
cpu = {}
for name, rows in results.items():
    cpu[name] = statistics.median(r[0] for r in rows)
    user, system = statistics.median(r[2] for r in rows), statistics.median(r[3] for r in rows)
    print(f"{name:<12} {cpu[name]:8.3f} {user:8.3f} {system:8.3f} {statistics.median(r[1] for r in rows):8.1f}")
ratio = cpu["parla say"] / cpu["espeak-ng"]
print(f"ratio parla/espeak-ng CPU: {ratio:.3f}  (target <= 1.15: {'met' if ratio <= 1.15 else 'NOT met'})")
