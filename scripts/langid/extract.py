#!/usr/bin/env python3
"""Collect training and held-out test text for Parla's language identifier.

Sources (see DATA.md for licences):
  * translated user-interface strings: every gettext catalogue (.mo) under
    /usr/share/locale (msgstr in the catalogue's language; msgid as English);
  * translated manual pages: /usr/share/man/<lang>/ (Debian's manpages-xx packages)
    and the English pages in /usr/share/man/man*/;
  * word frequency lists from PyPI's wordfreq (used for training only: they are
    words, not texts).

Every string is cleaned, de-duplicated per language and assigned to a split by a
hash of its text: 10 % test (never seen by training), 5 % dev (tuning), the rest
train. The split depends only on the text, so reruns are stable.

Usage: extract.py OUTDIR   (writes OUTDIR/{train,dev,test}/LANG.txt and OUTDIR/sources.tsv)
"""
import gettext
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Locale directory or man directory name -> the language Parla labels it with.
ALIASES = {"pt_BR": "pt", "pt_PT": "pt", "zh_CN": "zh", "zh_TW": "zh", "zh_HK": "zh", "zh_SG": "zh",
           "nb_NO": "nb", "no": "nb", "sr@Cyrl": "sr", "ms_MY": "ms", "es_ES": "es", "fr_FR": "fr",
           "de_DE": "de", "it_IT": "it", "ca@valencia": None, "sr@latin": None, "sr@ije": None,
           "en_GB": None, "en_AU": None, "en_CA": None, "en_US": None, "en": None}

MAX_TRAIN_CHARS = 4_000_000   # per language, per source kind
MAX_STRINGS = 200_000


def catalog_languages():
    langs = set()
    for f in glob.glob(os.path.join(REPO, "voices/espeak-ng/*.json")):
        with open(f) as fh:
            for tag in json.load(fh).get("languages", []):
                langs.add(tag.split("-")[0].lower())
    langs.discard("cmn")
    langs.add("zh")
    return langs


def label(dirname, known):
    if dirname in ALIASES:
        return ALIASES[dirname]
    base = re.split(r"[_@.]", dirname)[0].lower()
    if "@" in dirname:
        return None
    return base if base in known else None


FORMAT = re.compile(r"%(\d+\$)?[-+ #0']*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|L|q|j|z|t|I64)?[diouxXeEfFgGaAcspn%]"
                    r"|\$\{[^}]*\}|\{[^}]*\}|<[^>]{1,40}>|&[a-z]+;|https?://\S+|\S*/\S*/\S*|\\[nt]|[_&](?=\w)")


def clean_ui(s):
    s = FORMAT.sub(" ", s)
    s = s.replace("\u2026", " ").replace("...", " ")
    return " ".join(s.split())


GROFF_ESC = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\s[-+]?\d+|\\\*\(..|\\\*\[[^\]]*\]|\\\*.|\\\(..|\\\[[^\]]*\]|\\[-e&|^%:/,!0 ~c]|\\\".*$|\\.")


def clean_groff_line(line):
    if line.startswith((".", "'")):
        # Keep the text of a few font macros (.B word, .I word).
        m = re.match(r"^\.(B|I|BI|IB|BR|RB|IR|RI|SM|SB)\s+(.*)$", line)
        if not m:
            return None
        line = m.group(2).replace('"', "")
    line = GROFF_ESC.sub("", line)
    return line


SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def man_sentences(path):
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            raw = fh.read()
    except (UnicodeDecodeError, OSError, EOFError):
        return []
    paragraphs, cur = [], []
    for line in raw.splitlines():
        if line.startswith((".SH", ".SS", ".PP", ".P", ".LP", ".TP", ".IP", ".sp", ".br", ".nf", ".fi", ".EX", ".EE")) or not line.strip():
            if cur:
                paragraphs.append(" ".join(cur))
                cur = []
            continue
        text = clean_groff_line(line)
        if text:
            cur.append(text)
    if cur:
        paragraphs.append(" ".join(cur))
    out = []
    for p in paragraphs:
        for s in SENTENCE_END.split(p):
            s = " ".join(s.split())
            if s:
                out.append(s)
    return out


def letter_ratio(s):
    if not s:
        return 0
    return sum(1 for c in s if c.isalpha() or unicodedata.category(c).startswith("M")) / len(s)


def usable(s):
    letters = sum(1 for c in s if c.isalpha())
    return letters >= 4 and letter_ratio(s) >= 0.6 and len(s) <= 600


def split_of(text):
    h = int(hashlib.sha1(text.encode("utf-8")).hexdigest()[:8], 16) % 100
    if h < 10:
        return "test"
    if h < 15:
        return "dev"
    return "train"


_OWNERS = None


def package_of(path):
    """The Debian package that installed `path` (from dpkg's file lists)."""
    global _OWNERS
    if _OWNERS is None:
        _OWNERS = {}
        for lst in glob.glob("/var/lib/dpkg/info/*.list"):
            pkg = os.path.basename(lst)[:-5].split(":")[0]
            with open(lst, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    _OWNERS[line.rstrip("\n")] = pkg
    return _OWNERS.get(path, "unknown")


WORD = re.compile(r"[^\W\d_]+")


def import_wordfreq():
    try:
        import wordfreq
    except ImportError:
        sys.exit("wordfreq is not installed: run scripts/langid/train (it makes a virtual environment)")
    return wordfreq


def main():
    outdir = sys.argv[1]
    known = catalog_languages()
    texts = defaultdict(dict)        # lang -> {string: kind}
    sources = defaultdict(lambda: defaultdict(int))  # (package) -> lang -> strings

    # 1. gettext catalogues
    english = {}
    for mo in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        dirname = mo.split("/")[4]
        lang = label(dirname, known)
        try:
            with open(mo, "rb") as fh:
                cat = gettext.GNUTranslations(fh)._catalog
        except Exception:
            continue
        pkg = None
        for key, msgstr in cat.items():
            msgid = key[0] if isinstance(key, tuple) else key
            if not msgid or not msgstr:
                continue
            msgid = msgid.split("\x04")[-1]  # drop a msgctxt prefix
            src, dst = clean_ui(msgid), clean_ui(msgstr)
            if usable(src):
                english[src] = "ui"
            if lang and dst != src and usable(dst):
                if dst not in texts[lang]:
                    texts[lang][dst] = "ui"
                    if pkg is None:
                        pkg = package_of(mo)
                    sources[pkg][lang] += 1
    for s in english:
        texts["en"].setdefault(s, "ui")

    # 2. manual pages
    mandirs = [("en", d) for d in sorted(glob.glob("/usr/share/man/man[1-8]"))]
    for d in sorted(glob.glob("/usr/share/man/*")):
        name = os.path.basename(d)
        if not name.startswith("man"):
            lang = label(name, known)
            if lang:
                mandirs += [(lang, x) for x in sorted(glob.glob(d + "/man[1-8]"))]
    for lang, d in mandirs:
        chars = sum(len(s) for s, k in texts[lang].items() if k == "man")
        for page in sorted(glob.glob(d + "/*.gz")):
            if chars > MAX_TRAIN_CHARS:
                break
            n = 0
            for s in man_sentences(page):
                if usable(s) and s not in texts[lang]:
                    texts[lang][s] = "man"
                    chars += len(s)
                    n += 1
            if n:
                pkg = package_of(page)
                sources[pkg][lang] += n

    # Translations leave some strings in English (untranslated manual page paragraphs,
    # catalogue entries copied from the msgid): drop a string from a language other than
    # English when at least half of its words are common in English and at least four times
    # as common there as in the language (by the wordfreq lists; 0 where it has none).
    wordfreq = import_wordfreq()
    available = set()
    for lang in wordfreq.available_languages():
        try:
            wordfreq.word_frequency("a", lang)  # Japanese and Chinese need tokenizers we lack
            available.add(lang)
        except Exception:
            pass
    for lang in sorted(texts):
        if lang == "en":
            continue
        dropped = 0
        for s in list(texts[lang]):
            words = [w for w in WORD.findall(s.lower()) if len(w) > 1]
            if len(words) < 2:
                continue
            english = 0
            for w in words:
                f_en = wordfreq.word_frequency(w, "en")
                f_own = wordfreq.word_frequency(w, lang) if lang in available else 0.0
                if f_en > 1e-6 and f_en > 4 * f_own:
                    english += 1
            if english / len(words) >= 0.5:
                del texts[lang][s]
                dropped += 1
        if dropped:
            print(f"{lang}: dropped {dropped} strings that are mostly English", file=sys.stderr)

    for split in ("train", "dev", "test"):
        os.makedirs(os.path.join(outdir, split), exist_ok=True)
    summary = []
    for lang in sorted(texts):
        parts = defaultdict(list)
        for s, kind in sorted(texts[lang].items()):
            parts[split_of(s)].append(f"{kind}\t{s}")
        for split, lines in parts.items():
            with open(os.path.join(outdir, split, lang + ".txt"), "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines[:MAX_STRINGS]) + "\n")
        summary.append((lang, len(texts[lang]), sum(len(s) for s in texts[lang])))
    with open(os.path.join(outdir, "sources.tsv"), "w") as fh:
        for pkg in sorted(sources):
            for lang in sorted(sources[pkg]):
                fh.write(f"{pkg}\t{lang}\t{sources[pkg][lang]}\n")
    for lang, n, c in summary:
        print(f"{lang}\t{n} strings\t{c} chars")


if __name__ == "__main__":
    main()
