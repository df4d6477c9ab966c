#!/usr/bin/env python3
"""Collect training and held-out test text for Parla's language identifier.

Sources (see DATA.md for licences):
  * translated user-interface strings: every gettext catalogue (.mo) under
    /usr/share/locale (msgstr in the catalogue's language; msgid as English);
  * LibreOffice's and Mozilla's translations (Debian's libreoffice-l10n-LANG,
    firefox-esr-l10n-LANG and thunderbird-l10n-LANG, downloaded and unpacked by
    scripts/langid/train, not installed): LibreOffice's gettext catalogues and the Fluent
    (.ftl) and .properties files of Firefox's and Thunderbird's language packs;
  * the gettext catalogues of the applications in scripts/langid/catalogues.txt (GNOME's,
    KDE's, VLC's, GIMP's, ...; downloaded and unpacked the same way), for training only:
    they never go to a test set, and the held-out sources are picked as if they were not
    there, so the test sets stay those of the other sources;
  * translated manual pages: /usr/share/man/<lang>/ (Debian's manpages-xx packages)
    and the English pages in /usr/share/man/man*/;
  * Unicode CLDR (Debian's unicode-cldr-core): the display names, calendar words, unit
    and time-zone names of each locale, and the spoken names of the emoji (annotations);
  * word lists, for training only (they are words, not texts): PyPI's wordfreq (with
    frequencies), Debian's hunspell dictionaries (stems), Tesseract's OCR word lists
    (tesseract-ocr-LANG) and CLDR's emoji keywords.

Every string is cleaned, de-duplicated per language, dropped when another language has the
same string, and assigned to a split. First by
source: for each language with three or more sources, whole sources (Debian packages,
picked by a hash of package and language) holding 10–35 % of its strings go to
`unseen/`, so the test set can tell how the model does on text of a kind it never saw.
Close neighbours (NEIGHBOURS) have the same kinds of text held out, for all of them.
The rest by a hash of the text: 10 % test (never seen by training), 5 % dev (tuning),
the rest train. The split depends only on the text and the package names, so reruns are
stable.

Usage: extract.py OUTDIR [L10N_DIR]   (L10N_DIR: one unpacked package a folder, named after
the package; writes OUTDIR/{train,dev,test,unseen}/LANG.txt,
OUTDIR/wordlists/LANG.txt and OUTDIR/sources.tsv)
"""
import difflib
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
           "nb_NO": "nb", "no": "nb", "sr@Cyrl": "sr", "sr@latin": "sr-Latn", "sr_Latn": "sr-Latn", "ms_MY": "ms", "es_ES": "es", "fr_FR": "fr",
           "de_DE": "de", "it_IT": "it", "ca@valencia": None, "sr@ije": None,
           "en_GB": None, "en_AU": None, "en_CA": None, "en_US": None, "en_ZA": None, "en": None,
           # LibreOffice's and Mozilla's names: Paraguayan Guarani, Kurmanji in Latin script,
           # Chinese and Portuguese variants, Valencian (a Catalan variant spelled differently)
           "gug": "gn", "kmr_Latn": "ku", "zh_cn": "zh", "zh_tw": "zh", "ca_valencia": None}

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
    langs.add("sr-Latn")  # Serbian in Latin script: a class of its own, spoken by the Serbian voice
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


# Languages whose Debian translations partly use a script other than the one their voice and
# most of their readers use (Tatar's catalogues are in the Latin Zamanalif alphabet; Tatar is
# written in Cyrillic): only text in the usual script is kept, so the class and its test are
# about the language as it is written.
USUAL_SCRIPT = {"tt": "CYRILLIC"}


def in_script(s, script):
    letters = [c for c in s if c.isalpha()]
    return letters and sum(1 for c in letters if unicodedata.name(c, "").startswith(script)) >= 0.8 * len(letters)


# Languages whose sources leave untranslated strings in a language other than English: CLDR's
# Greenlandic keeps many Danish names.
LEFT_IN = {"kl": ["da"]}


def foreign_word(wordfreq, w, lang, foreign, available):
    """A word common in one of `foreign` and at least four times as common there as in `lang`."""
    try:
        f_own = wordfreq.word_frequency(w, lang) if lang in available else 0.0
        for f in foreign:
            f_other = wordfreq.word_frequency(w, f)
            if f_other > 1e-6 and f_other > 4 * f_own:
                return True
    except Exception:  # a language whose tokenizer wordfreq lacks here
        return False
    return False


FLUENT_MESSAGE = re.compile(r"^(-?[A-Za-z][\w-]*)[ \t]*=[ \t]*(.*)$")
FLUENT_ATTRIBUTE = re.compile(r"^[ \t]+\.[\w-]+[ \t]*=[ \t]*(.*)$")
PROPERTY = re.compile(r"^[ \t]*([^#!=:\s][^=:]*?)[ \t]*[=:][ \t]*(.*)$")
MOZ_PLACEHOLDER = re.compile(r"%(\d+\$)?[SsDdu@]|#\d|\$\w+\$")


def fluent_values(text):
    """The (identifier, text) of each message and attribute of a Fluent file. Terms (-brand-name: names,
    not sentences) and messages with select expressions (plural variants) are left out;
    placeables ({ $count }, { -brand-short-name }) are removed by clean_ui."""
    out, cur, term, key, message = [], None, False, None, None

    def flush():
        if cur is not None and not term:
            value = " ".join(x for x in cur if x)
            if "->" not in value:
                out.append((key, value))

    for line in text.splitlines():
        m = FLUENT_MESSAGE.match(line)
        a = FLUENT_ATTRIBUTE.match(line)
        if m:
            flush()
            cur, term = [m.group(2).strip()], m.group(1).startswith("-")
            key = message = m.group(1)
        elif a and cur is not None:
            flush()
            cur = [a.group(1).strip()]
            key = message + "." + line.split("=", 1)[0].strip()
        elif line[:1] in (" ", "\t") and cur is not None and line.strip():
            cur.append(line.strip())
        else:
            flush()
            cur = None
    flush()
    return out


def properties_values(text):
    """The (key, value) pairs of a .properties file (\\uXXXX escapes read, %S and #1
    placeholders removed, the plural forms of a "#1 file;#1 files" value taken one by one)."""
    out = []
    for line in text.splitlines():
        m = PROPERTY.match(line)
        if not m:
            continue
        v = re.sub(r"\\u([0-9a-fA-F]{4})", lambda x: chr(int(x.group(1), 16)), m.group(2))
        v = v.replace("\\n", " ").replace("\\", "")
        parts = v.split(";") if "#1" in v else [v]
        out += [(f"{m.group(1)}#{i}", MOZ_PLACEHOLDER.sub(" ", p)) for i, p in enumerate(parts)]
    return out


def langpack_strings(xpi, locale):
    """Cleaned strings of a Mozilla language pack (.xpi: a zip of Fluent and .properties
    files), each with its message's key, the same in every language (the file's path
    without the locale, and the message's identifier)."""
    import zipfile
    out = []
    try:
        z = zipfile.ZipFile(xpi)
        for name in sorted(z.namelist()):
            if name.endswith(".ftl"):
                values = fluent_values(z.read(name).decode("utf-8", "replace"))
            elif name.endswith(".properties"):
                values = properties_values(z.read(name).decode("utf-8", "replace"))
            else:
                continue
            path = "/".join("LOCALE" if part == locale else part for part in name.split("/"))
            out += [(("moz", path, k), clean_ui(v)) for k, v in values]
    except (OSError, zipfile.BadZipFile):
        return []
    return out


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


CLDR = "/usr/share/unicode/cldr/common"
# CLDR elements whose text is natural language (names, calendar words, units, zones). Everything
# else (patterns such as "d MMM y", exemplar character sets, symbols) is left out.
CLDR_TEXT = {"language", "script", "territory", "variant", "key", "type", "measurementSystemName",
             "month", "day", "quarter", "dayPeriod", "era", "displayName", "unitPattern",
             "relativeTimePattern", "relative", "exemplarCity", "generic", "standard", "daylight"}
PLACEHOLDER = re.compile(r"\{\d\}")


def cldr_label(stem, known):
    """CLDR file stem (sw, sw_KE, sr_Latn, zh_Hant) -> Parla language, or None."""
    if stem in ALIASES:
        return ALIASES[stem]
    parts = stem.split("_")
    if len(parts) > 1 and parts[1] in ("Latn", "Arab", "Cyrl", "Hans", "Deva", "Beng", "Olck") and parts[0] != "zh":
        # A second script of the language (sr_Cyrl is Serbian's default script: keep it).
        if not (parts[0] == "sr" and parts[1] == "Cyrl"):
            return None
    return parts[0] if parts[0] in known else None


def cldr_files(kind, known):
    """(lang, XML root) of each CLDR file of `kind` (main, annotations) in a known language."""
    import xml.etree.ElementTree as ET
    for path in sorted(glob.glob(os.path.join(CLDR, kind, "*.xml"))):
        lang = cldr_label(os.path.basename(path)[:-4], known)
        if not lang:
            continue
        try:
            yield lang, ET.parse(path).getroot()
        except ET.ParseError:
            continue


def cldr_texts(known):
    """(lang, text) from CLDR's locale data and emoji names, and (lang, word) keywords."""
    texts, words = [], []
    for lang, root in cldr_files("main", known):
        for el in root.iter():
            if el.tag in CLDR_TEXT and el.text and not el.attrib.get("alt") == "variant":
                t = " ".join(PLACEHOLDER.sub(" ", el.text).split())
                if t:
                    texts.append((lang, t))
    for lang, root in cldr_files("annotations", known):
        for el in root.iter("annotation"):
            if not el.text:
                continue
            if el.attrib.get("type") == "tts":
                texts.append((lang, " ".join(el.text.split())))
            else:
                words += [(lang, w.strip()) for w in el.text.split("|") if w.strip()]
    return texts, words


# Word lists used for training only: hunspell dictionaries (stems; affix flags dropped) and
# Tesseract's LSTM word lists. Locale or Tesseract code -> Parla language.
HUNSPELL = {"sw_TZ": "sw", "sw_KE": "sw", "gd_GB": "gd", "gug_PY": "gn", "id_ID": "id", "af_ZA": "af",
            "bs_BA": "bs", "hr_HR": "hr", "sr_Latn_RS": "sr-Latn", "sr_RS": "sr", "ne_NP": "ne"}
TESSERACT = {"gla": "gd", "hat": "ht", "lat": "la", "ltz": "lb", "mlt": "mt", "mri": "mi", "que": "qu",
             "snd": "sd", "swa": "sw", "tat": "tt", "srp_latn": "sr-Latn", "msa": "ms", "ind": "id",
             "afr": "af", "nld": "nl", "mkd": "mk", "bul": "bg", "srp": "sr", "hrv": "hr", "bos": "bs",
             "nep": "ne", "hin": "hi", "mar": "mr"}
TESSDATA = "/usr/share/tesseract-ocr/5/tessdata"


def hunspell_words(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()[1:]
    out = []
    for line in lines:
        w = line.split("/")[0].split("\t")[0].strip()
        if w and not any(c.isdigit() for c in w):
            out.append(w)
    return out


def tesseract_words(code, tmp):
    src = os.path.join(TESSDATA, code + ".traineddata")
    prefix = os.path.join(tmp, code + ".")
    try:
        subprocess.run(["combine_tessdata", "-u", src, prefix], check=True, capture_output=True)
        out = prefix + "words"
        subprocess.run(["dawg2wordlist", prefix + "lstm-unicharset", prefix + "lstm-word-dawg", out],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    with open(out, encoding="utf-8", errors="replace") as fh:
        return [w for w in fh.read().split() if not any(c.isdigit() for c in w)]


def word_lists(known, tmp):
    """lang -> {word}, and (package, lang) -> count, from hunspell and Tesseract."""
    lists = defaultdict(set)
    counts = defaultdict(int)
    for loc, lang in HUNSPELL.items():
        path = f"/usr/share/hunspell/{loc}.dic"
        if lang in known and os.path.exists(path):
            ws = hunspell_words(path)
            lists[lang].update(w.lower() for w in ws)
            counts[(package_of(path), lang)] += len(ws)
    for code, lang in TESSERACT.items():
        path = os.path.join(TESSDATA, code + ".traineddata")
        if lang in known and os.path.exists(path):
            ws = tesseract_words(code, tmp)
            lists[lang].update(w.lower() for w in ws)
            counts[(package_of(path), lang)] += len(ws)
    return lists, counts


# Close neighbours. Each group has the same kinds of text held out as unseen for all its
# languages: were Mozilla's Croatian held out while its Bosnian (much of it the Croatian
# with a few words changed) was trained on, the unseen test would measure how well the
# model knows Mozilla's words, under the wrong label, not how it does on a kind of text it
# never saw. Serbian is with its Latin form (its text, transliterated, trains sr-Latn too)
# and with its Cyrillic neighbours.
NEIGHBOURS = [{"hr", "bs", "sr-Latn", "sr", "mk", "bg"}, {"ms", "id"}, {"af", "nl"}, {"ne", "hi", "mr"}]
NEAR_COPY = 0.75            # share of agreeing words (difflib's ratio) that makes a near-copy
L10N_PACKAGE = re.compile(r"^((?:firefox-esr|thunderbird|libreoffice)-l10n|manpages)-[a-z]")


def family(pkg):
    """The kind of text a source is, the same for every language: a translation package's
    name without its language (libreoffice-l10n-hr: libreoffice-l10n); any other package
    holds every language's catalogue under one name."""
    m = L10N_PACKAGE.match(pkg)
    return m.group(1) if m else pkg


def unseen_families(group, by_family):
    """The kinds of text held out for a group of close neighbours (`by_family`: language ->
    family -> strings): picked in a stable order (hash of family and group) while no
    language's held-out share goes above 35 %, until every language with three or more
    sources has 10 %. A family is taken only when it adds to a language still short."""
    members = [lang for lang in sorted(group) if len(by_family.get(lang, {})) >= 3]
    total = {lang: sum(by_family[lang].values()) for lang in members}
    name = "+".join(sorted(group))
    families = sorted({f for lang in members for f in by_family[lang]},
                      key=lambda f: hashlib.sha1(f"{f}\t{name}".encode()).hexdigest())
    held, n = set(), {lang: 0 for lang in members}
    short = lambda lang: n[lang] < 0.10 * total[lang]
    for f in families:
        if not any(short(lang) for lang in members):
            break
        if not any(short(lang) and by_family[lang].get(f) for lang in members):
            continue
        if any(n[lang] + by_family[lang].get(f, 0) > 0.35 * total[lang] for lang in members):
            continue
        held.add(f)
        for lang in members:
            n[lang] += by_family[lang].get(f, 0)
    return held


def unseen_sources(lang, by_source):
    """The whole sources of `lang` held out as unseen text: `unseen_families` for a language
    alone, its packages as the kinds of text, or none if they do not make 10 % of it."""
    held = unseen_families({lang}, {lang: by_source})
    return held if sum(by_source[p] for p in held) >= 0.10 * sum(by_source.values()) else set()


def main():
    outdir = sys.argv[1]
    l10n_roots = sorted(glob.glob(os.path.join(sys.argv[2], "*"))) if len(sys.argv) > 2 else []
    l10n_roots = [r for r in l10n_roots if os.path.isdir(r) and os.path.basename(r) != "debs"]
    known = catalog_languages()
    texts = defaultdict(dict)        # lang -> {string: (kind, package)}
    sources = defaultdict(lambda: defaultdict(int))  # (package) -> lang -> strings

    # 1. gettext catalogues (and LibreOffice's, which are gettext too)
    english = {}

    messages = defaultdict(dict)     # a message's key -> {lang: its translation}

    def add(lang, pkg, dst, src=None, key=None, kind="ui"):
        if src is not None and usable(src) and src not in english:
            english[src] = pkg
        if lang and dst != src and usable(dst):
            if key is not None:
                messages[key].setdefault(lang, dst)
            if dst not in texts[lang]:
                texts[lang][dst] = (kind, pkg)
                sources[pkg][lang] += 1

    def add_catalogue(mo, lang, pkg, kind="ui"):
        try:
            with open(mo, "rb") as fh:
                cat = gettext.GNUTranslations(fh)._catalog
        except Exception:
            return
        for entry, msgstr in cat.items():
            msgid = entry[0] if isinstance(entry, tuple) else entry  # (msgid, plural form) or msgid
            if not msgid or not msgstr:
                continue
            key = ("mo", os.path.basename(mo), entry)
            msgid = msgid.split("\x04")[-1]  # drop a msgctxt prefix
            add(lang, pkg, clean_ui(msgstr), clean_ui(msgid), key=key, kind=kind)

    for mo in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        add_catalogue(mo, label(mo.split("/")[4], known), package_of(mo))
    for root in l10n_roots:
        pkg = os.path.basename(root)
        for mo in sorted(glob.glob(os.path.join(root, "usr/lib/libreoffice/program/resource/*/LC_MESSAGES/*.mo"))):
            add_catalogue(mo, label(mo.split("/")[-3].replace("-", "_"), known), pkg)
        for xpi in sorted(glob.glob(os.path.join(root, "usr/lib/*/**/langpack-*.xpi"), recursive=True)):
            locale = os.path.basename(xpi)[len("langpack-"):].split("@")[0]
            lang = label(locale.replace("-", "_"), known)
            if lang:
                for key, text in langpack_strings(xpi, locale):
                    add(lang, pkg, text, key=key)
    # Other applications' catalogues (scripts/langid/catalogues.txt), read after all the rest
    # so that a string they share with another source stays that source's (and in its split).
    training_only = {os.path.basename(r) for r in l10n_roots if not L10N_PACKAGE.match(os.path.basename(r))}
    for root in l10n_roots:
        pkg = os.path.basename(root)
        if pkg in training_only:
            for mo in sorted(glob.glob(os.path.join(root, "usr/share/locale/*/LC_MESSAGES/*.mo"))):
                add_catalogue(mo, label(mo.split("/")[-3], known), pkg, kind="app")
    for s, pkg in english.items():
        if s not in texts["en"]:
            texts["en"][s] = ("app" if pkg in training_only else "ui", pkg)
            sources[pkg]["en"] += 1

    # 2. manual pages
    mandirs = [("en", d) for d in sorted(glob.glob("/usr/share/man/man[1-8]"))]
    for d in sorted(glob.glob("/usr/share/man/*")):
        name = os.path.basename(d)
        if not name.startswith("man"):
            lang = label(name, known)
            if lang:
                mandirs += [(lang, x) for x in sorted(glob.glob(d + "/man[1-8]"))]
    for lang, d in mandirs:
        chars = sum(len(s) for s, (k, _) in texts[lang].items() if k == "man")
        for page in sorted(glob.glob(d + "/*.gz")):
            if chars > MAX_TRAIN_CHARS:
                break
            pkg = None
            for s in man_sentences(page):
                if usable(s) and s not in texts[lang]:
                    pkg = pkg or package_of(page)
                    texts[lang][s] = ("man", pkg)
                    chars += len(s)
                    sources[pkg][lang] += 1

    # 3. CLDR: locale names and emoji names are text; emoji keywords are a word list.
    cldr_pkg = package_of(os.path.join(CLDR, "main", "en.xml"))
    keywords = defaultdict(set)
    if os.path.isdir(CLDR):
        cldr, kw = cldr_texts(known)
        for lang, s in cldr:
            if usable(s) and s not in texts[lang]:
                texts[lang][s] = ("cldr", cldr_pkg)
                sources[cldr_pkg][lang] += 1
        for lang, w in kw:
            keywords[lang].add(w.lower())

    # 4. Word lists (training only).
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        lists, counts = word_lists(known, tmp)
    for lang, ws in keywords.items():
        lists[lang].update(ws)
        counts[(cldr_pkg, lang)] += len(ws)
    for (pkg, lang), n in counts.items():
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
        foreign = ["en"] + LEFT_IN.get(lang, [])
        for s in list(texts[lang]):
            words = [w for w in WORD.findall(s.lower()) if len(w) > 1]
            if len(words) < (1 if lang in LEFT_IN else 2):
                continue
            if sum(1 for w in words if foreign_word(wordfreq, w, lang, foreign, available)) / len(words) >= 0.5:
                del texts[lang][s]
                dropped += 1
        if dropped:
            print(f"{lang}: dropped {dropped} strings that are mostly {' or '.join(foreign)}", file=sys.stderr)
    # The same for word lists (OCR lists and emoji keywords pick up English words too).
    for lang in sorted(lists):
        if lang == "en":
            continue
        foreign = ["en"] + LEFT_IN.get(lang, [])
        before = len(lists[lang])
        lists[lang] = {w for w in lists[lang] if not foreign_word(wordfreq, w, lang, foreign, available)}
        if before - len(lists[lang]):
            print(f"{lang}: dropped {before - len(lists[lang])} listed words of {' or '.join(foreign)}", file=sys.stderr)

    for lang, script in USUAL_SCRIPT.items():
        for s in [s for s in texts.get(lang, {}) if not in_script(s, script)]:
            del texts[lang][s]
    # A string written the same in two languages (a country's name, a translation copied
    # from a neighbour's, such as many of Mozilla's Bosnian strings from its Croatian ones)
    # says nothing about which of them it is: it is dropped from both, for training and for
    # the test sets alike (where no answer would be right). "The same" as the model reads
    # it: the same words, lower-cased, whatever the digits, punctuation and spacing between
    # them ("Otvori privatni prozor" in Mozilla's Croatian, "Otvori Privatni prozor" in its
    # Bosnian; "Format :" and "Format:").
    def reading(s):
        return tuple(WORD.findall(s.lower())) or s

    languages_of = defaultdict(set)
    for lang in texts:
        for s in texts[lang]:
            languages_of[reading(s)].add(lang)
    shared = defaultdict(int)
    for lang in texts:
        for s in [s for s in texts[lang] if len(languages_of[reading(s)]) > 1]:
            del texts[lang][s]
            shared[lang] += 1
    for lang, n in sorted(shared.items()):
        print(f"{lang}: dropped {n} strings written the same in another language", file=sys.stderr)
    # Nearly the same, too, between close neighbours: two translations of one message whose
    # words mostly agree (NEAR_COPY of them, in order) are one translation copied and
    # touched up (Mozilla's Bosnian "Za prikaz vaše lozinke, unesite svoje podatke…" is its
    # Croatian "Za prikaz tvoje lozinke, upiši svoje podatke…"). Most of their words would
    # teach the neighbour the other's language; both are dropped.
    group_of = {lang: i for i, group in enumerate(NEIGHBOURS) for lang in group}
    near = defaultdict(int)
    for by_lang in messages.values():
        langs = sorted(lang for lang in by_lang if lang in group_of)
        for i, a in enumerate(langs):
            for b in langs[i + 1:]:
                if group_of[a] != group_of[b]:
                    continue
                wa, wb = WORD.findall(by_lang[a].lower()), WORD.findall(by_lang[b].lower())
                if wa and wb and difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio() >= NEAR_COPY:
                    for lang in (a, b):
                        if texts[lang].pop(by_lang[lang], None):
                            near[lang] += 1
    for lang, n in sorted(near.items()):
        print(f"{lang}: dropped {n} near-copies of a neighbour's translation", file=sys.stderr)
    for split in ("train", "dev", "test", "unseen", "wordlists"):
        os.makedirs(os.path.join(outdir, split), exist_ok=True)
    summary = []
    held_out = []
    by_family = defaultdict(lambda: defaultdict(int))
    for lang in texts:
        for _, pkg in texts[lang].values():
            if pkg not in training_only:
                by_family[lang][family(pkg)] += 1
    held_families = [unseen_families(group, by_family) for group in NEIGHBOURS]
    for group, held in zip(NEIGHBOURS, held_families):
        print(f"held out for {', '.join(sorted(group))}: {', '.join(sorted(held))}", file=sys.stderr)
    for lang in sorted(texts):
        by_source = defaultdict(int)
        for _, pkg in texts[lang].values():
            if pkg not in training_only:
                by_source[pkg] += 1
        if lang in group_of:
            unseen = {pkg for pkg in by_source if family(pkg) in held_families[group_of[lang]]}
        else:
            unseen = unseen_sources(lang, by_source)
        held_out += [(lang, pkg, by_source[pkg]) for pkg in sorted(unseen)]
        parts = defaultdict(list)
        # A training-only string that reads the same as another source's (a copied GTK
        # message with other punctuation) would train on a test string: it is left out.
        owned = {reading(s) for s, (_, pkg) in texts[lang].items() if pkg not in training_only}
        for s, (kind, pkg) in sorted(texts[lang].items()):
            if pkg in training_only and reading(s) in owned:
                continue
            split = "unseen" if pkg in unseen else "train" if pkg in training_only else split_of(s)
            parts[split].append(f"{kind}\t{s}")
        for split, lines in parts.items():
            with open(os.path.join(outdir, split, lang + ".txt"), "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines[:MAX_STRINGS]) + "\n")
        summary.append((lang, len(texts[lang]), sum(len(s) for s in texts[lang])))
    for lang, ws in sorted(lists.items()):
        ws = sorted(w for w in ws if sum(1 for c in w if c.isalpha()) >= 2)
        with open(os.path.join(outdir, "wordlists", lang + ".txt"), "w", encoding="utf-8") as fh:
            fh.write("\n".join(ws) + "\n")
        print(f"{lang}\tword list of {len(ws)} words", file=sys.stderr)
    with open(os.path.join(outdir, "unseen-sources.tsv"), "w") as fh:
        for lang, pkg, n in held_out:
            fh.write(f"{lang}\t{pkg}\t{n}\n")
    with open(os.path.join(outdir, "sources.tsv"), "w") as fh:
        for pkg in sorted(sources):
            for lang in sorted(sources[pkg]):
                fh.write(f"{pkg}\t{lang}\t{sources[pkg][lang]}\n")
    for lang, n, c in summary:
        print(f"{lang}\t{n} strings\t{c} chars")


if __name__ == "__main__":
    main()
