#!/usr/bin/env python3
"""scripts/bench-render's measurements: see that script. Prints one table and the targets."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

corpus, runs = sys.argv[1], int(sys.argv[2])
cores = os.cpu_count()
tmp = tempfile.mkdtemp(prefix="parla-bench-render-")

# The espeak-ng voice Parla uses for each language, so every system speaks the same voices.
defaults = json.load(open("voices/defaults.json"))["languages"]
rows = [line.rstrip("\n").split("\t", 2) for line in open(corpus, encoding="utf-8") if line.strip()]
voice_lines = os.path.join(tmp, "voices.tsv")
with open(voice_lines, "w", encoding="utf-8") as f:
    for ident, lang, text in rows:
        f.write(f"{defaults[lang].split('.', 1)[1]}\t{ident}\t{text}\n")
floor_input = os.path.join(tmp, "floor.tsv")
with open(floor_input, "w", encoding="utf-8") as f:
    for ident, lang, text in rows:
        f.write(f"{defaults[lang].split('.', 1)[1]}\t{text}\n")

loop = f"""while IFS=$'\\t' read -r voice id text; do
  espeak-ng -v "$voice" -w "$OUT/$id.wav" <<< "$text"
done < {voice_lines}"""


counter = [0]


def run(name, cmd, out=None, shell=False):
    # Every run writes into a new directory; all are removed at the end. (Deleting the last
    # run's thousands of files just before would make ext4 scan past their recently freed
    # inodes on every file created: a cost of the benchmark, not of rendering.)
    if out:
        counter[0] += 1
        out = f"{out}-{counter[0]}"
        os.makedirs(out)
        cmd = [out if c == "OUTDIR" else c for c in cmd] if not shell else cmd
    env = dict(os.environ, OUT=out or tmp)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, shell=shell, executable="/bin/bash" if shell else None, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        sys.exit(f"{name} failed ({status}): {err[-2000:]}")
    peak = usage.ru_maxrss / 1024  # the largest process of the tree
    worker = None
    m = re.search(r"peak memory ([0-9.]+) MB here, ([0-9.]+) MB per worker", err)
    if m:
        peak, worker = float(m.group(1)), float(m.group(2))
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak": peak, "worker": worker, "out": out}


parla = ".build/release/parla"
systems = {
    "parla render --jobs 1": lambda: run("parla1", [parla, "render", corpus, "-o", "OUTDIR", "--jobs", "1", "--progress", "none"], f"{tmp}/p1"),
    f"parla render (--jobs {cores})": lambda: run("parlaN", [parla, "render", corpus, "-o", "OUTDIR", "--progress", "none"], f"{tmp}/pN"),
    "libespeak-ng floor": lambda: run("floor", [".build/bench/espeak-floor", floor_input]),
}
loop_name = "espeak-ng -w loop"

results = {name: [] for name in systems}
for fn in systems.values():
    fn()  # warm the page cache
for _ in range(runs):
    for name, fn in systems.items():
        results[name].append(fn())
results[loop_name] = [run("loop", loop, f"{tmp}/loop", shell=True)]

p1 = results["parla render --jobs 1"][-1]["out"]
pN = results[f"parla render (--jobs {cores})"][-1]["out"]
audio = 0.0
for name in os.listdir(p1):
    if name.endswith(".wav"):
        audio += (os.path.getsize(f"{p1}/{name}") - 44) / 2 / 22050
identical = all(
    open(f"{p1}/{n}", "rb").read() == open(f"{pN}/{n}", "rb").read()
    for n in os.listdir(p1) if n.endswith(".wav") or n == "results.jsonl")

print(f"corpus: {corpus} ({len(rows)} lines, {len(set(r[1] for r in rows))} languages, "
      f"{audio / 3600:.2f} h of audio), {cores} cores, median of {runs} runs (the loop: 1 run)")
print(f"{'system':<26} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'worker MB':>10}")
med = {}
for name, rs in results.items():
    m = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "peak")}
    w = [r["worker"] for r in rs if r["worker"] is not None]
    m["worker"] = max(w) if w else None
    med[name] = m
    wtext = f"{m['worker']:10.1f}" if m["worker"] is not None else f"{'':>10}"
    print(f"{name:<26} {m['wall']:8.2f} {m['cpu']:8.2f} {m['peak']:8.1f} {wtext}")

floor = med["libespeak-ng floor"]
one = med["parla render --jobs 1"]
alln = med[f"parla render (--jobs {cores})"]
loopm = med[loop_name]


def verdict(ok):
    return "met" if ok else "NOT met"


r1 = alln["wall"] / floor["cpu"]
r2 = one["cpu"] / floor["cpu"]
r3 = loopm["wall"] / alln["wall"]
worker = max(one["worker"] or 0, alln["worker"] or 0)
# The same ratios round by round (each round runs the systems back to back), to show how
# much this machine's speed drifts between runs; the verdicts use the medians above.
fl = results["libespeak-ng floor"]
one_rounds = results["parla render --jobs 1"]
all_rounds = results[f"parla render (--jobs {cores})"]
paired1 = sorted(o["cpu"] / f["cpu"] for o, f in zip(one_rounds, fl))
pairedN = sorted(a["wall"] / f["cpu"] for a, f in zip(all_rounds, fl))
print("per round, all-core wall / floor:", " ".join(f"{x:.2f}" for x in pairedN),
      "| --jobs 1 CPU / floor:", " ".join(f"{x:.2f}" for x in paired1))
print(f"all-core wall / floor single-core time: {r1:.2f}  (target <= 0.6: {verdict(r1 <= 0.6)})")
print(f"--jobs 1 CPU / floor CPU:               {r2:.2f}  (target <= 1.15: {verdict(r2 <= 1.15)})")
print(f"espeak-ng loop wall / all-core wall:    {r3:.1f}x (target >= 5: {verdict(r3 >= 5)})")
print(f"peak memory of a worker:                {worker:.1f} MB (target <= 60: {verdict(worker <= 60)})")
print(f"--jobs 1 and --jobs {cores} WAV files and results.jsonl identical: {identical}")
shutil.rmtree(tmp, ignore_errors=True)
