#!/usr/bin/env python3
"""Train Parla's language identifier and write voices/langid.bin.

Input: the corpus written by extract.py (train/ and dev/ splits; test/ is never read
here) and PyPI's wordfreq lists. Output: a binary model (format below) and a
report of dev-set accuracy.

The model: for each script group (Latin, Cyrillic, Arabic, Han+Kana, Devanagari,
Bengali) a naive-Bayes table of hashed character n-grams (orders 1..N) of
lower-cased words framed by boundary marks, and of whole words (a word longer than the
longest n-gram is one more feature: the n-grams alone cannot tell "kerana" (ms) from
"karena" (id) as surely as the words do). Each table cell holds, per language,
how much less likely (in nats × scale, 0 = the most likely language) that bucket of
n-grams is in the language than in the language where it is most likely.

Hashing (must match Sources/ParlaCore/Detection/LanguageModel.swift):
  word  -> [0x02] + lowercased scalars + [0x03]
  every window of n = 1..N scalars that is not a lone 0x02/0x03:
    h = 0xcbf29ce484222325 ^ n;  for each scalar c: h = (h ^ c) * 0x100000001b3  (mod 2^64)
    bucket = ((h * 0x9E3779B97F4A7C15) mod 2^64) >> (64 - bits)
  and, where the group's flags have bit 0 and the framed word is longer than N, the same
  hash over the whole framed word.

File format (little endian):
  "PLID" u32 version(3)
  u32 n; n × (u32 from, u32 to)             simple lower-case map
  u32 groups
  per group: str id; u8 k; k × str script; u8 maxOrder; u8 bits; u8 flags; f32 scale;
             u16 L; L × str tag; f32 × L bias (prior cost in nats);
             f32 × L fit scale (the fit limit's factor; 1 for a naive-Bayes table); (1 << bits) × L bytes table
  (str = u8 length + UTF-8 bytes)

Usage: train.py CORPUS_DIR OUT_MODEL [--report FILE]
"""
import argparse
import glob
import json
import os
import re
import struct
import sys
import unicodedata
from collections import defaultdict

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GROUPS = {
    # id: (scripts, max n-gram order, bucket bits, whole words as features too). Not for Han
    # and Kana: written without spaces, their "words" are whole phrases, which never recur.
    "Latn": (["Latn"], 5, 18, True),
    "Cyrl": (["Cyrl"], 5, 16, True),
    "Arab": (["Arab"], 5, 15, True),
    "Hani": (["Hani", "Hira", "Kana"], 3, 16, False),
    "Deva": (["Deva"], 5, 15, True),
    "Beng": (["Beng"], 5, 14, True),
}
SCALE = 16.0              # table units per nat
CLIP = 255
ALPHA = 0.05              # additive smoothing (pseudo-count per bucket)
MIN_TRAIN_LETTERS = 12_000
WORDFREQ_TOP = 60_000
WORDFREQ_MASS = 5e5       # n-gram counts a frequency list weighs (or as much as the text, if more)
MAX_TRAIN_CHARS = 3_000_000
# Other applications' catalogues (extract.py's kind "app", training only) count half as much
# as the rest of a language's text (a word of theirs weighs 0.5 in the n-gram counts), and
# do not make a class: a language with no other text would have nothing to be tested on.
# Dev-set macro accuracy, short / long: 93.26 / 99.25 % at 1, 93.50 / 99.20 at 0.5, 93.61 /
# 99.24 at 0.25; bench-detect's unseen sources favoured 0.5 by a little (DATA.md, BENCHMARKS.md).
APP_WEIGHT = float(os.environ.get("PARLA_APP_WEIGHT", "0.5"))
MIN_WORD_LIST = 2_000     # words: a shorter dictionary is not enough for a class of its own
# A dictionary's weight: none where the language has a frequency list or 20,000 words of text
# (on the dev set, dictionaries beside text blurred close neighbours: hr, bs and sr-Latn share
# most of their dictionary words), and as much as the text where there is little else.
WORD_LIST_SHARE = 0.0
WORD_LIST_SHARE_ALONE = 1.0
WORD_LIST_TEXT_WORDS = 20_000  # words of text that make a dictionary secondary
WORD_LIST_MAX_GAIN = 20        # at most this many counts per listed word's n-gram
MIN_LETTERS_WITH_LIST = 3_000  # letters of text a class needs beside a word list


_CYR = "абвгдђежзијклљмнњопрстћуфхцчџш"
_LAT = ["a", "b", "v", "g", "d", "đ", "e", "ž", "z", "i", "j", "k", "l", "lj", "m", "n", "nj", "o", "p", "r", "s", "t",
        "ć", "u", "f", "h", "c", "č", "dž", "š"]
SERBIAN_LATIN = {ord(c): l for c, l in zip(_CYR, _LAT)}
SERBIAN_LATIN.update({ord(c.upper()): l.capitalize() for c, l in zip(_CYR, _LAT)})


def english_word(wordfreq, w, own):
    f_en = wordfreq.word_frequency(w, "en")
    if f_en <= 1e-6:
        return False
    try:
        f_own = wordfreq.word_frequency(w, own) if own else 0.0
    except Exception:  # Japanese and Chinese need tokenizers we lack: keep the word
        return False
    return f_en > 4 * f_own
PRIME = np.uint64(0x100000001B3)
MIX = np.uint64(0x9E3779B97F4A7C15)
SEED = 0xCBF29CE484222325

# wordfreq list name -> Parla language (None: not used)
WORDFREQ_MAP = {"sh": None, "fil": None}


def load_scripts():
    """Code point -> ISO 15924 code, from the generated Swift table (one source of truth)."""
    src = open(os.path.join(REPO, "Sources/ParlaCore/Detection/UnicodeScriptTable.swift"), encoding="utf-8").read()
    codes = re.findall(r'"([A-Z][a-z]{3})"', src.split("static let codes: [String] = [")[1].split("]")[0])
    table = src.split("static let rangeTable: [UInt32] = [")[1].split("]")[0]
    nums = [int(x, 0) for x in re.findall(r"0x[0-9A-F]+|\d+", table)]
    ranges = [(nums[i], nums[i + 1], codes[nums[i + 2]]) for i in range(0, len(nums), 3)]
    return ranges


def lower_map():
    m = {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        lc = c.lower()
        if len(lc) == 1 and lc != c:
            m[cp] = ord(lc)
    return m


def class_for(ranges, scripts):
    parts = []
    for lo, hi, code in ranges:
        if code in scripts:
            parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
    return "".join(parts)


class Tokenizer:
    """Words of one script group: letters of the group's scripts plus combining marks and
    ZWNJ/ZWJ following them (same rule as the Swift tokenizer); `whole_words`: whether the
    group has whole words as features too."""

    def __init__(self, ranges, scripts, lmap, whole_words):
        letters = class_for(ranges, scripts)
        # Inherited (combining marks) continue a word.
        marks = class_for(ranges, ["Zinh"]) + "\u200c\u200d"
        self.word = re.compile(f"[{letters}][{letters}{marks}]*")
        self.letters = re.compile(f"[{letters}]")
        self.lmap = lmap
        self.whole_words = whole_words

    def words(self, text):
        return self.word.findall(text.translate(self.lmap))


def hashed_windows(a, max_order, bits):
    """For each order n, the buckets of every n-scalar window of `a` (scalars of words framed by
    the markers 2 and 3, texts joined by the separator 1) and which of them are n-grams: a window
    does not cross from one word (or text) into the next, and a unigram is a letter, not a
    marker. Yields (n, buckets, counted)."""
    cut = ((a[:-1] == 3) & (a[1:] == 2)) | (a[:-1] == 1) | (a[1:] == 1)
    C = np.concatenate([[0], np.cumsum(cut.astype(np.int64))])
    marker = (a == 2) | (a == 3)
    for n in range(1, max_order + 1):
        L = len(a) - n + 1
        if L <= 0:
            break
        h = np.full(L, np.uint64(SEED), dtype=np.uint64)
        for k in range(n):
            h = (h ^ a[k:k + L]) * PRIME
        counted = ((C[np.arange(L) + n - 1] - C[np.arange(L)]) == 0) & (a[:L] != 1)
        if n == 1:
            counted &= ~marker
        yield n, ((h * MIX) >> np.uint64(64 - bits)).astype(np.int64), counted


def word_bucket(word, bits):
    """The bucket of a whole word (framed as its n-grams are)."""
    h = SEED
    M = (1 << 64) - 1
    for c in [2] + [ord(c) for c in word] + [3]:
        h = ((h ^ c) * 0x100000001B3) & M
    return ((h * 0x9E3779B97F4A7C15) & M) >> (64 - bits)


def rows(max_order, whole):
    """Rows of counts per bucket: one per n-gram order, and one of whole words (`whole`)."""
    return max_order + (1 if whole else 0)


def ngram_counts(words, weights, max_order, bits, whole):
    """Weighted counts of hashed n-grams per order, and of whole words longer than the longest
    n-gram in the last row if `whole` (``rows``): array (rows, 1 << bits)."""
    out = np.zeros((rows(max_order, whole), 1 << bits), dtype=np.float64)
    if not words:
        return out
    if whole:
        weight_of = defaultdict(float)
        for word, weight in zip(words, weights):
            if len(word) + 2 > max_order:
                weight_of[word] += weight
        for word, weight in weight_of.items():
            out[max_order, word_bucket(word, bits)] += weight
    s = "\x02" + "\x03\x02".join(words) + "\x03"
    a = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    lengths = np.fromiter((len(w) + 2 for w in words), dtype=np.int64, count=len(words))
    w = np.repeat(np.asarray(weights, dtype=np.float64), lengths)
    for n, b, counted in hashed_windows(a, max_order, bits):
        out[n - 1] += np.bincount(b[counted], weights=w[:len(b)][counted], minlength=1 << bits)
    return out


def features(word, max_order, bits, whole):
    """Bucket indices of one word (Python reference used for evaluation)."""
    seq = [2] + [ord(c) for c in word] + [3]
    out = []
    M = (1 << 64) - 1
    for end in range(len(seq)):
        for n in range(1, min(max_order, end + 1) + 1):
            start = end - n + 1
            if n == 1 and seq[end] in (2, 3):
                continue
            h = SEED
            for c in seq[start:end + 1]:
                h = ((h ^ c) * 0x100000001B3) & M
            out.append(((h * 0x9E3779B97F4A7C15) & M) >> (64 - bits))
    if whole and len(seq) > max_order:
        out.append(word_bucket(word, bits))
    return out


def read_split(corpus, split, lang, kinds=False):
    """The strings of a split (with their kinds, "ui", "man", "cldr" or "app", if `kinds`)."""
    path = os.path.join(corpus, split, lang + ".txt")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        pairs = [line.rstrip("\n").split("\t", 1) for line in fh if "\t" in line]
    return pairs if kinds else [t for _, t in pairs]


def wordfreq_lists():
    try:
        import wordfreq
    except ImportError:
        sys.exit("wordfreq is not installed: run scripts/langid/train (it makes a virtual environment)")
    data = os.path.join(os.path.dirname(wordfreq.__file__), "data")
    langs = {}
    for f in glob.glob(os.path.join(data, "*_*.msgpack.gz")):
        size, lang = os.path.basename(f).split(".")[0].split("_", 1)
        if lang in WORDFREQ_MAP and WORDFREQ_MAP[lang] is None:
            continue
        if size == "large" or lang not in langs:
            langs[WORDFREQ_MAP.get(lang, lang)] = lang
    return langs, wordfreq


# The detector's costs (Sources/ParlaCore/Detection/LanguageDetector.swift): a word's emission
# is its table units × EMISSION_WEIGHT / (scale × max order) nats; a language's prior is
# OTHER_COST nats, SCRIPT_DEFAULT_COST for the script's default language, plus its bias.
EMISSION_WEIGHT = 0.5
OTHER_COST = 3.0
SCRIPT_DEFAULT_COST = 1.0
BIAS_STEPS = np.arange(-1.0, 1.01, 0.25)  # small: a prior must not overrule clear evidence
BIAS_GAIN = 0.002         # a step is taken only if it adds this much macro accuracy (0.2 points)
BIAS_MAX_STRINGS = 300    # dev strings per language and length used for tuning


def priors(tags, default, bias):
    base = np.array([SCRIPT_DEFAULT_COST if t.split("-")[0] == default else OTHER_COST for t in tags])
    return base + np.asarray(bias)


def prior_units(tags, default, bias, max_order):
    """The prior costs of `priors` in table units, as they add to a string's summed penalties."""
    return priors(tags, default, bias) * SCALE * max_order / EMISSION_WEIGHT


def dev_strings(corpus, tok, max_order, bits, lang):
    """The dev strings of `lang` that tuning and the report use: up to BIAS_MAX_STRINGS short
    (10–40 code points) and as many long (60 or more) ones with letters of the group, each as
    (length bucket, words, bucket indices of its features)."""
    seen = {"short": 0, "long": 0}
    for s in read_split(corpus, "dev", lang):
        n = len(s)
        b = "short" if 10 <= n <= 40 else "long" if n >= 60 else None
        if b is None or seen[b] >= BIAS_MAX_STRINGS:
            continue
        words = tok.words(s)
        idx = [x for w in words for x in features(w, max_order, bits, tok.whole_words)]
        if not idx:
            continue
        seen[b] += 1
        yield b, words, idx


def tune_bias(corpus, tok, max_order, bits, tags, q, default):
    """Per-language prior costs (nats) that maximise the dev set's macro accuracy over the
    group's languages and both lengths, by coordinate descent over a grid. Naive Bayes favours
    a language with more (or more uniform) training text on the words neighbours share; a
    small prior evens that out on short texts and does nothing to long ones."""
    L = len(tags)
    if L < 2:
        return [0.0] * L
    rows, gold, weight = [], [], []
    qf = q.astype(np.float64)
    for i, lang in enumerate(tags):
        seen = {"short": 0, "long": 0}
        items = []
        for b, _, idx in dev_strings(corpus, tok, max_order, bits, lang):
            seen[b] += 1
            items.append((qf[idx].sum(axis=0) * EMISSION_WEIGHT / (SCALE * max_order), b))
        for e, b in items:
            rows.append(e)
            gold.append(i)
            weight.append(1.0 / seen[b])  # every language and length counts the same
    if not rows:
        return [0.0] * L
    E = np.array(rows)
    gold = np.array(gold)
    weight = np.array(weight)
    bias = np.zeros(L)
    total = float(weight.sum())

    def accuracy(b):
        pred = np.argmin(E + priors(tags, default, b), axis=1)
        return float((weight * (pred == gold)).sum())

    best = accuracy(bias)
    for _ in range(3):
        improved = False
        for i in range(L):
            if tags[i].split("-")[0] == default:
                continue  # the script's default keeps its place: ties go to it, by design
            before = keep = bias[i]
            keep_a = best
            for step in BIAS_STEPS:
                bias[i] = step
                a = accuracy(bias)
                if a > keep_a:
                    keep, keep_a = step, a
            if keep_a > best + BIAS_GAIN * total:
                bias[i], best, improved = keep, keep_a, True
            else:
                bias[i] = before
        if not improved:
            break
    return [float(x) for x in bias]


# Discriminative refinement of the naive-Bayes table: naive Bayes counts every shared n-gram
# as independent evidence, so close neighbours (hr, bs and sr-Latn; ms and id) are told apart
# by how much text each had rather than by the n-grams that differ. An averaged perceptron
# over training strings moves the table cells of the n-grams that decide a confusion: for a
# string the table gets wrong (or right by less than the margin), its n-grams cost the right
# language LEARNING_RATE units less and the language it was mistaken for as much more.
REFINE_EPOCHS = int(os.environ.get("PARLA_REFINE_EPOCHS", "3"))
# PARLA_REFINE_EPOCHS=0 ships the plain naive-Bayes table. How much of the refined table goes
# into the model; the rest is the naive-Bayes table. All of it raises accuracy most, but the
# confidence suffers: the rows of common n-grams drift in a random walk of updates, so text of
# the model's own languages fits it worse (18 % of the right dev strings fell below half
# confidence). Half of each, with the fit scales below, keeps the confidence where naive
# Bayes had it and most of the accuracy.
REFINE_MIX = float(os.environ.get("PARLA_REFINE_MIX", "0.5"))
REFINE_STRINGS = int(os.environ.get("PARLA_REFINE_STRINGS", "6000"))  # training strings per language (short and long alike)
REFINE_MARGIN = 160.0          # table units (one nat of the detector's cost)
LEARNING_RATE = 1.0            # table units per n-gram and update


def batch_features(tok, texts, max_order, bits):
    """Bucket indices of each text's n-grams (as `features`, for many texts at once)."""
    words_of = [tok.words(t) for t in texts]
    keep = [i for i, ws in enumerate(words_of) if ws]
    out = [np.zeros(0, dtype=np.int64) for _ in texts]
    if not keep:
        return out
    seq, owner = [], []
    for i in keep:
        s = "\x02" + "\x03\x02".join(words_of[i]) + "\x03"
        seq.append(s)
        owner.append(len(s))
    a = np.frombuffer("\x01".join(seq).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    text_id = np.repeat(np.arange(len(keep)), [n + 1 for n in owner])[:len(a)]
    parts_b, parts_t = [], []
    for _, b, counted in hashed_windows(a, max_order, bits):
        parts_b.append(b[counted])
        parts_t.append(text_id[:len(b)][counted])
    b = np.concatenate(parts_b)
    t = np.concatenate(parts_t)
    order = np.argsort(t, kind="stable")
    b, t = b[order], t[order]
    bounds = np.searchsorted(t, np.arange(len(keep) + 1))
    for j, i in enumerate(keep):
        out[i] = b[bounds[j]:bounds[j + 1]]
        if tok.whole_words:
            whole = [word_bucket(w, bits) for w in words_of[i] if len(w) + 2 > max_order]
            out[i] = np.concatenate([out[i], np.asarray(whole, dtype=np.int64)])
    return out


def refine(corpus, tok, max_order, bits, tags, q, default, group):
    import hashlib
    import random
    prior = prior_units(tags, default, np.zeros(len(tags)), max_order)
    examples = []
    for i, lang in enumerate(tags):
        texts = [t for t in read_split(corpus, "train", lang) if len(t) >= 10]
        texts.sort(key=lambda t: hashlib.sha1(t.encode()).hexdigest())
        texts = texts[:REFINE_STRINGS]
        for f in batch_features(tok, texts, max_order, bits):
            if len(f):
                examples.append((f, i))
    if not examples:
        return q
    W = q.astype(np.float64)
    U = np.zeros_like(W)   # for the average: W_avg = W - U / c
    c = 1.0
    rng = random.Random(20261125)
    for epoch in range(REFINE_EPOCHS):
        rng.shuffle(examples)
        updates = 0
        for f, gold in examples:
            s = W[f].sum(axis=0) + prior
            sg = s[gold]
            s[gold] = np.inf
            p = int(np.argmin(s))
            if s[p] - sg < REFINE_MARGIN:
                np.subtract.at(W[:, gold], f, LEARNING_RATE)
                np.add.at(W[:, p], f, LEARNING_RATE)
                np.subtract.at(U[:, gold], f, c * LEARNING_RATE)
                np.add.at(U[:, p], f, c * LEARNING_RATE)
                updates += 1
            c += 1
        print(f"refine {group}: epoch {epoch + 1}, {updates} updates over {len(examples)} strings", file=sys.stderr)
    W = W - U / c
    W -= W.min(axis=1, keepdims=True)
    return np.minimum(np.rint(W), CLIP).astype(np.uint8)


# The detector's fit limit (LanguageDetector.fit, whose constants these copy) was set on
# naive-Bayes tables so that 0.4–3 % of a group's correctly labelled dev strings exceed it: a
# language's own text costs it little per n-gram there. A refined table spreads its rows, most
# for the languages with the least text (Tatar's own sentences came to cost it a third more),
# so each language gets a fit scale, the limit's factor: how much more its own dev strings
# cost it per n-gram under the final table than under naive Bayes (the ratio of their
# FIT_PERCENTILE-th percentiles),
# times one factor for the group that brings the share of its right dev strings over the
# limit back to what it was under naive Bayes.
FIT_BASE, FIT_SLOPE = 0.38, 0.625
FIT_MIN_STRINGS = 20      # right dev strings a language needs for a ratio of its own
FIT_PERCENTILE = float(os.environ.get("PARLA_FIT_PERCENTILE", "90"))  # where the costs are compared


def ngram_count(k, max_order):
    """N-grams of a word of k letters, as the detector counts them (not the whole word)."""
    return k + sum(max(0, k + 2 - n + 1) for n in range(2, max_order + 1))


def fit_scales(corpus, tok, max_order, bits, tags, q, q_nb, prior):
    L = len(tags)
    if q is q_nb:
        return [1.0] * L
    qf, nb = q.astype(np.float64), q_nb.astype(np.float64)
    final, plain, lang_of = [], [], []
    for i, lang in enumerate(tags):
        for _, words, idx in dev_strings(corpus, tok, max_order, bits, lang):
            if int(np.argmin(qf[idx].sum(axis=0) + prior)) != i:
                continue
            ngrams = sum(ngram_count(len(w), max_order) for w in words)
            limit = np.log(L + 1) * (FIT_BASE + FIT_SLOPE / np.sqrt(ngrams))  # without a scale
            final.append(qf[idx, i].sum() / SCALE / ngrams / limit)
            plain.append(nb[idx, i].sum() / SCALE / ngrams / limit)
            lang_of.append(i)
    if not final:
        return [1.0] * L
    final, plain, lang_of = np.array(final), np.array(plain), np.array(lang_of)

    def ratio_of(a, b):
        return np.percentile(a, FIT_PERCENTILE) / max(np.percentile(b, FIT_PERCENTILE), 1e-9)

    ratio = np.full(L, ratio_of(final, plain))
    for i in range(L):
        mine = lang_of == i
        if mine.sum() >= FIT_MIN_STRINGS:
            ratio[i] = ratio_of(final[mine], plain[mine])
    share = float((plain > 1).mean())
    group = float(np.quantile(final / ratio[lang_of], 1 - share))
    scales = np.clip(ratio * group, 0.5, 16.0)
    print(f"fit: {share * 100:.2f} % of right dev strings over the limit under naive Bayes, "
          f"{float((final > 1).mean()) * 100:.2f} % under the final table, "
          f"{float((final > scales[lang_of]).mean()) * 100:.2f} % with the scales", file=sys.stderr)
    return [float(x) for x in scales]


def write_str(fh, s):
    b = s.encode("utf-8")
    fh.write(struct.pack("<B", len(b)) + b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--report")
    args = ap.parse_args()

    ranges = load_scripts()
    lmap = lower_map()
    catalog = set()
    for f in glob.glob(os.path.join(REPO, "voices/espeak-ng/*.json")):
        for tag in json.load(open(f)).get("languages", []):
            catalog.add(tag.split("-")[0].lower())
    catalog.discard("cmn")
    catalog.add("zh")
    catalog.add("sr-Latn")
    wf_langs, wordfreq = wordfreq_lists()
    word_lists = {}
    for path in glob.glob(os.path.join(args.corpus, "wordlists", "*.txt")):
        with open(path, encoding="utf-8") as fh:
            ws = fh.read().split()
        if len(ws) >= MIN_WORD_LIST:
            word_lists[os.path.basename(path)[:-4]] = ws

    langs = sorted({os.path.basename(p)[:-4] for p in glob.glob(os.path.join(args.corpus, "train", "*.txt"))} | set(wf_langs) | set(word_lists))
    langs = [l for l in langs if l in catalog]
    tokenizers = {g: Tokenizer(ranges, scripts, lmap, whole) for g, (scripts, _, _, whole) in GROUPS.items()}
    group_letter_sets = {g: t.letters for g, t in tokenizers.items()}

    # Assign each language to the group holding most of its letters.
    members = defaultdict(list)
    train_text = {}
    app_text = {}
    wf_words = {}
    for lang in langs:
        texts = read_split(args.corpus, "train", lang, kinds=True)
        total = 0
        kept = []
        for kind, t in texts:
            kept.append((kind, t))
            total += len(t)
            if total > MAX_TRAIN_CHARS:
                break
        joined = "\n".join(t for kind, t in kept if kind != "app")
        app_joined = "\n".join(t for kind, t in kept if kind == "app")
        words = None
        if lang in wf_langs:
            freqs = wordfreq.get_frequency_dict(wf_langs[lang], wordlist="best")
            top = sorted(freqs.items(), key=lambda kv: -kv[1])[:WORDFREQ_TOP]
            words = top
        sample = joined + "\n" + app_joined if joined else " ".join(w for w, _ in (words or [])[:5000]) or " ".join(word_lists.get(lang, [])[:5000])
        counts = {g: len(rx.findall(sample)) for g, rx in group_letter_sets.items()}
        g, n = max(counts.items(), key=lambda kv: kv[1])
        # Letters of scripts outside the modelled groups (Greek, Hangul, Thai, ...): such a
        # language is identified by its script alone.
        other = sum(1 for c in sample if c.isalpha()) - sum(counts.values())
        letters = len(group_letter_sets[g].findall(joined)) if joined else 0
        if other > n:
            print(f"skip {lang}: written mostly in a script without a model", file=sys.stderr)
            continue
        if n == 0 or (letters < MIN_TRAIN_LETTERS and words is None and lang not in word_lists):
            print(f"skip {lang}: {letters} letters in {g}, no word list", file=sys.stderr)
            continue
        if letters < MIN_TRAIN_LETTERS and words is None and letters < MIN_LETTERS_WITH_LIST:
            # A dictionary alone (OCR word lists carry stray English and German words) makes a
            # class nobody can test: better to say the language is not detected.
            print(f"skip {lang}: {letters} letters of text in {g}, too few beside a word list", file=sys.stderr)
            continue
        members[g].append(lang)
        train_text[lang] = joined
        app_text[lang] = app_joined
        wf_words[lang] = words

    # Serbian is written in both alphabets, and the Cyrillic one maps letter for letter onto the
    # Latin one: the (larger) Cyrillic text, transliterated, trains Serbian in Latin script too.
    if "sr" in train_text and "sr-Latn" in train_text:
        train_text["sr-Latn"] += "\n" + train_text["sr"].translate(SERBIAN_LATIN)
        app_text["sr-Latn"] += "\n" + app_text["sr"].translate(SERBIAN_LATIN)

    defaults = json.load(open(os.path.join(REPO, "voices/defaults.json"))).get("scripts", {})
    model_groups = []
    for g, (scripts, max_order, bits, whole) in GROUPS.items():
        tags = sorted(members[g])
        if len(tags) < 1:
            continue
        tok = tokenizers[g]
        R = rows(max_order, whole)
        logp = np.zeros((len(tags), R, 1 << bits), dtype=np.float64)
        counts_of = []
        for i, lang in enumerate(tags):
            own, apps = tok.words(train_text[lang]), tok.words(app_text[lang])
            words = own + apps
            c_text = ngram_counts(words, [1.0] * len(own) + [APP_WEIGHT] * len(apps), max_order, bits, whole)
            c = c_text.copy()
            if wf_words[lang]:
                wl, ww = [], []
                for w, f in wf_words[lang]:
                    ws = tok.words(w)
                    if len(ws) == 1:
                        wl.append(ws[0])
                        ww.append(f)
                c_wf = ngram_counts(wl, ww, max_order, bits, whole)
                for n in range(R):
                    t_text = c_text[n].sum()
                    target = max(t_text, WORDFREQ_MASS)
                    if c_wf[n].sum() > 0:
                        c[n] += c_wf[n] / c_wf[n].sum() * target
            alone = not wf_words[lang] and len(words) < WORD_LIST_TEXT_WORDS
            if lang in word_lists and (alone or WORD_LIST_SHARE > 0):
                # A dictionary has no frequencies: every word counts once.
                listed = word_lists[lang]
                if lang != "en":
                    # Drop the English words OCR lists and keyword lists pick up.
                    own = wf_langs.get(lang)
                    listed = [w for w in listed if not english_word(wordfreq, w, own)]
                wl = [w for x in listed for w in tok.words(x)]
                c_wl = ngram_counts(wl, [1.0] * len(wl), max_order, bits, whole)
                share = WORD_LIST_SHARE_ALONE if alone else WORD_LIST_SHARE
                for n in range(R):
                    # ... but a short list is not blown up to the weight of a long one.
                    target = min(max(c_text[n].sum(), 2e6) * share, c_wl[n].sum() * WORD_LIST_MAX_GAIN)
                    if c_wl[n].sum() > 0:
                        c[n] += c_wl[n] / c_wl[n].sum() * target
            counts_of.append(c)
            extra = (" + wordfreq" if wf_words[lang] else "") + (f" + {len(word_lists[lang])} listed words" if lang in word_lists else "")
            print(f"{g} {lang}: {len(words)} words of text{extra}", file=sys.stderr)
        for i, c in enumerate(counts_of):
            for n in range(R):
                logp[i, n] = np.log((c[n] + ALPHA) / (c[n].sum() + ALPHA * (1 << bits)))
        # All orders (and whole words) share one table, so a bucket may hold n-grams of several
        # orders: its probability is the mean of the per-order probabilities.
        total = np.logaddexp.reduce(logp, axis=1) - np.log(R)  # (L, B)
        pen = -total.T
        pen -= pen.min(axis=1, keepdims=True)
        q = np.minimum(np.rint(pen * SCALE), CLIP).astype(np.uint8)
        q_nb = q
        if REFINE_EPOCHS and len(tags) > 1:
            r = refine(args.corpus, tok, max_order, bits, tags, q, defaults.get(g), g)
            m = (1.0 - REFINE_MIX) * q.astype(np.float64) + REFINE_MIX * r.astype(np.float64)
            m -= m.min(axis=1, keepdims=True)
            q = np.minimum(np.rint(m), CLIP).astype(np.uint8)
        model_groups.append((g, scripts, max_order, bits, tags, q, q_nb))

    # Per-language prior costs, tuned on the dev set (see tune_bias), then the fit scale.
    tuned = []
    for g, scripts, max_order, bits, tags, q, q_nb in model_groups:
        bias = tune_bias(args.corpus, tokenizers[g], max_order, bits, tags, q, defaults.get(g))
        for t, b in zip(tags, bias):
            if b:
                print(f"bias {g} {t}: {b:+.2f} nats", file=sys.stderr)
        prior = prior_units(tags, defaults.get(g), bias, max_order)
        fs = fit_scales(args.corpus, tokenizers[g], max_order, bits, tags, q, q_nb, prior)
        print(f"fit scales {g}: " + " ".join(f"{t} {f:.2f}" for t, f in zip(tags, fs)), file=sys.stderr)
        tuned.append((g, scripts, max_order, bits, tags, q, bias, fs))
    model_groups = tuned

    with open(args.out + ".tmp", "wb") as fh:
        fh.write(b"PLID" + struct.pack("<I", 3))
        pairs = sorted(lmap.items())
        fh.write(struct.pack("<I", len(pairs)))
        fh.write(b"".join(struct.pack("<II", a, b) for a, b in pairs))
        fh.write(struct.pack("<I", len(model_groups)))
        for g, scripts, max_order, bits, tags, q, bias, fs in model_groups:
            write_str(fh, g)
            fh.write(struct.pack("<B", len(scripts)))
            for s in scripts:
                write_str(fh, s)
            fh.write(struct.pack("<BBBf", max_order, bits, 1 if tokenizers[g].whole_words else 0, SCALE))
            fh.write(struct.pack("<H", len(tags)))
            for t in tags:
                write_str(fh, t)
            fh.write(struct.pack(f"<{len(tags)}f", *bias))
            fh.write(struct.pack(f"<{len(tags)}f", *fs))
            fh.write(q.tobytes())
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}: {os.path.getsize(args.out) / 1e6:.1f} MB", file=sys.stderr)

    # Dev-set accuracy (whole strings, short and long).
    report = []
    for g, scripts, max_order, bits, tags, q, bias, _ in model_groups:
        tok = tokenizers[g]
        qf = q.astype(np.float32)
        prior = prior_units(tags, defaults.get(g), bias, max_order)
        for i, lang in enumerate(tags):
            res = {"short": [0, 0], "long": [0, 0]}
            for bucket, _, idx in dev_strings(args.corpus, tok, max_order, bits, lang):
                pred = int(np.argmin(qf[idx].sum(axis=0) + prior))
                res[bucket][0] += pred == i
                res[bucket][1] += 1
            report.append((g, lang, res))
    lines = []
    for g, lang, res in report:
        cells = [f"{res[b][0] / res[b][1] * 100:5.1f}% of {res[b][1]:3d}" if res[b][1] else "      -     " for b in ("short", "long")]
        lines.append(f"{g}\t{lang}\t{cells[0]}\t{cells[1]}")
    for b in ("short", "long"):
        accs = [res[b][0] / res[b][1] for _, _, res in report if res[b][1] >= 20]
        lines.append(f"macro {b}: {np.mean(accs) * 100:.2f}% over {len(accs)} languages")
    text = "\n".join(lines)
    print(text)
    if args.report:
        open(args.report, "w").write(text + "\n")


if __name__ == "__main__":
    main()
