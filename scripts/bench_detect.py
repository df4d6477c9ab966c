#!/usr/bin/env python3
"""Language detection benchmark: Parla vs lingua on the held-out test set.

Usage: bench_detect.py PARLA_BINARY [TEST_TSV]

Both detectors are restricted to the languages both support and see the same strings in
the same run. Prints one table: accuracy per language on short (10–40 code points) and
long (60–400) texts with macro averages; the share of letters labelled with the right
language in mixed-script strings (2–3 languages of different scripts concatenated);
throughput in MB/s of UTF-8 on one core; model load time and memory.
"""
import importlib.metadata
import json
import os
import random
import resource
import subprocess
import sys
import time
import unicodedata
from collections import defaultdict

from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

parla = sys.argv[1]
tsv = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "bench", "langid-test.tsv")
env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
env.pop("LANGUAGE", None)


def run(args, stdin=None):
    p = subprocess.run([parla, "detect", *args], input=stdin, capture_output=True, env=env)
    if p.returncode != 0:
        sys.exit(f"parla detect {' '.join(args)} failed: {p.stderr.decode()}")
    return p.stdout.decode("utf-8")


def lingua_language(tag):
    try:
        return Language.from_iso_code_639_1(getattr(IsoCode639_1, tag.upper()))
    except (AttributeError, ValueError):
        return None


rows = [line.rstrip("\n").split("\t", 2) for line in open(tsv, encoding="utf-8")]
info = json.loads(run(["--model-info"]))
ours = set(info["languages"])
common = sorted(t for t in ours if lingua_language(t) and any(r[0] == t for r in rows))
rows = [r for r in rows if r[0] in common]
only = ",".join(common)

parla_info = json.loads(run(["--model-info", "--only", only]))

# Lingua: its best (high-accuracy) mode, every model preloaded, restricted to the common set.
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
lingua = LanguageDetectorBuilder.from_languages(*[lingua_language(t) for t in common]).with_preloaded_language_models().build()
lingua_load = (time.perf_counter() - t0) * 1000
lingua_rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
lingua_tag = {lingua_language(t): t for t in common}

# Accuracy on single-language strings.
texts = [r[2] for r in rows]
ours_pred = run(["--lines", "--only", only], "\n".join(texts).encode() + b"\n").splitlines()
assert len(ours_pred) == len(texts), (len(ours_pred), len(texts))
t0 = time.perf_counter()
lingua_pred = []
for t in texts:
    lang = lingua.detect_language_of(t)
    lingua_pred.append(lingua_tag.get(lang, "und"))
lingua_secs = time.perf_counter() - t0
text_bytes = sum(len(t.encode()) for t in texts)

acc = defaultdict(lambda: [0, 0, 0])  # (lang, bucket) -> [ours, lingua, n]
for (lang, bucket, _), o, l in zip(rows, ours_pred, lingua_pred):
    a = acc[(lang, bucket)]
    a[0] += o == lang
    a[1] += l == lang
    a[2] += 1

# Mixed-script strings: parts of 2-3 languages of different scripts, joined by spaces. A part
# is a test string whose letters are all in its language's script (test strings may contain
# a few foreign words, whose right label would be ambiguous here).


def script_key(s):
    counts = defaultdict(int)
    for c in s:
        if c.isalpha():
            name = unicodedata.name(c, "?").split()[0]
            counts["CJK" if name in ("CJK", "HIRAGANA", "KATAKANA") else name] += 1
    return max(counts, key=counts.get) if counts else None


texts_of = defaultdict(list)
for lang, _, t in rows:
    texts_of[lang].append(t)
lang_script = {l: script_key(" ".join(ts[:20])) for l, ts in texts_of.items()}


def pure(text, key):
    for c in text:
        if c.isalpha():
            name = unicodedata.name(c, "?").split()[0]
            if ("CJK" if name in ("CJK", "HIRAGANA", "KATAKANA") else name) != key:
                return False
    return True


by_lang = {l: [t for t in ts if pure(t, lang_script[l])] for l, ts in texts_of.items()}
by_lang = {l: ts for l, ts in by_lang.items() if len(ts) >= 10}
rng = random.Random(20261121)
mixed = []
langs = sorted(by_lang)
while len(mixed) < 400:
    k = rng.choice([2, 3])
    chosen = []
    for lang in rng.sample(langs, len(langs)):
        if all(lang_script[lang] != lang_script[c] for c in chosen):
            chosen.append(lang)
        if len(chosen) == k:
            break
    parts = [(lang, rng.choice(by_lang[lang])) for lang in chosen]
    text, labels = "", []
    for i, (lang, part) in enumerate(parts):
        if i:
            text += " "
            labels.append(None)
        text += part
        labels += [lang] * len(part)
    mixed.append((text, labels))

ours_seg = run(["--segments", "--only", only], "\n".join(t for t, _ in mixed).encode() + b"\n").splitlines()
right = [0, 0]
total = 0
for (text, labels), line in zip(mixed, ours_seg):
    pred = [None] * len(text)
    for seg in json.loads(line):
        for i in range(seg["start"], seg["end"]):
            pred[i] = seg["lang"]
    lpred = [None] * len(text)
    for r in lingua.detect_multiple_languages_of(text):
        tag = lingua_tag.get(r.language, "und")
        for i in range(r.start_index, r.end_index):
            lpred[i] = tag
    for i, c in enumerate(text):
        if labels[i] is None or not (c.isalpha() or unicodedata.category(c).startswith("M")):
            continue
        total += 1
        right[0] += pred[i] == labels[i]
        right[1] += lpred[i] == labels[i]

# Throughput on one core.
tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "parla-bench-detect.txt")
with open(tmp, "w", encoding="utf-8") as fh:
    fh.write("\n".join(texts) + "\n")
tp = json.loads(run(["--throughput", tmp, "--only", only]))
t0 = time.perf_counter()
for t, _ in mixed[:100]:
    lingua.detect_multiple_languages_of(t)
lingua_multi_secs = time.perf_counter() - t0
mixed_bytes = sum(len(t.encode()) for t, _ in mixed[:100])
os.unlink(tmp)

# The table.
print(f"Language detection: Parla vs lingua {importlib.metadata.version('lingua-language-detector')}")
print(f"held-out test set {os.path.basename(tsv)}: {len(rows)} strings, {len(common)} languages both support; both restricted to them")
print()
print(f"{'lang':6} {'short: parla':>14} {'lingua':>8} {'n':>4}   {'long: parla':>13} {'lingua':>8} {'n':>4}")
macro = {"short": [[], []], "long": [[], []]}
for lang in common:
    cells = []
    for b in ("short", "long"):
        a = acc.get((lang, b))
        if a and a[2]:
            o, l = a[0] / a[2] * 100, a[1] / a[2] * 100
            macro[b][0].append(o)
            macro[b][1].append(l)
            cells.append(f"{o:13.1f}% {l:7.1f}% {a[2]:4d}")
        else:
            cells.append(f"{'-':>14} {'-':>8} {'':>4}")
    print(f"{lang:6} {cells[0]}   {cells[1]}")
print("-" * 72)
for b in ("short", "long"):
    o, l = macro[b]
    print(f"macro-average {b:5} ({len(o)} languages): parla {sum(o) / len(o):.2f}%   lingua {sum(l) / len(l):.2f}%   "
          f"{'parla ≥ lingua' if sum(o) >= sum(l) else 'parla < lingua'}")
print(f"mixed-script strings ({len(mixed)}, 2–3 languages of different scripts): letters labelled right: "
      f"parla {right[0] / total * 100:.2f}%   lingua {right[1] / total * 100:.2f}%   (target ≥ 98%)")
print(f"throughput, one core: parla {tp['lines_mb_per_s']:.1f} MB/s line by line, {tp['text_mb_per_s']:.1f} MB/s as one text (target ≥ 5);"
      f"   lingua {text_bytes / lingua_secs / 1e6:.3f} MB/s line by line, {mixed_bytes / lingua_multi_secs / 1e6:.3f} MB/s segmenting mixed strings")
print(f"model: parla {parla_info['model_bytes'] / 1e6:.1f} MB on disk (memory-mapped), loaded in {parla_info['load_ms']:.1f} ms, "
      f"+{parla_info['rss_delta_bytes'] / 1e6:.1f} MB resident after loading, {tp['max_rss_bytes'] / 1e6:.0f} MB peak for the whole process after detecting the test set;"
      f"   lingua loaded in {lingua_load:.0f} ms, +{lingua_rss / 1e6:.0f} MB resident")
