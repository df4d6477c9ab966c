#!/usr/bin/env python3
"""Write a test set (bench/langid-test.tsv, bench/langid-unseen.tsv) from a held-out split
written by extract.py: `test` (strings never seen by training, from sources it did see) or
`unseen` (whole sources training never saw).

Each line: LANG <TAB> short|long <TAB> TEXT. Short texts have 10–40 code points, long ones
60–400. A string is kept only if at least 80 % of its letters are in the script that
most of the language's test letters use (translated manual pages contain untranslated
English paragraphs and commands). At most 200 strings per language and length, picked
by a hash of the text, so the file is stable across reruns.
"""
import glob
import hashlib
import os
import sys
import unicodedata
from collections import Counter

corpus, out = sys.argv[1], sys.argv[2]
split = sys.argv[3] if len(sys.argv) > 3 else "test"
PER_BUCKET = 200
MIN_BUCKET = 30


def script_of(c):
    # The first word of the character name is a good enough script key here
    # (LATIN, CYRILLIC, ARABIC, CJK, HIRAGANA, ...); Han and Kana count as one.
    try:
        name = unicodedata.name(c)
    except ValueError:
        return None
    key = name.split()[0]
    if key in ("CJK", "HIRAGANA", "KATAKANA"):
        return "CJK"
    return key


rows = []
for path in sorted(glob.glob(os.path.join(corpus, split, "*.txt"))):
    lang = os.path.basename(path)[:-4]
    texts = [l.rstrip("\n").split("\t", 1)[1] for l in open(path, encoding="utf-8") if "\t" in l]
    letters = Counter(script_of(c) for t in texts for c in t if c.isalpha())
    if not letters:
        continue
    main = letters.most_common(1)[0][0]
    buckets = {"short": [], "long": []}
    for t in texts:
        n = len(t)
        b = "short" if 10 <= n <= 40 else "long" if 60 <= n <= 400 else None
        if b is None:
            continue
        ls = [script_of(c) for c in t if c.isalpha()]
        if not ls or sum(1 for s in ls if s == main) / len(ls) < 0.8:
            continue
        buckets[b].append(t)
    for b, items in buckets.items():
        items.sort(key=lambda t: hashlib.sha1(t.encode()).hexdigest())
        if len(items) < MIN_BUCKET:
            continue
        rows += [(lang, b, t) for t in items[:PER_BUCKET]]

with open(out, "w", encoding="utf-8") as fh:
    for lang, b, t in rows:
        fh.write(f"{lang}\t{b}\t{t}\n")
langs = sorted({r[0] for r in rows})
print(f"{out}: {len(rows)} strings, {len(langs)} languages: {' '.join(langs)}")
