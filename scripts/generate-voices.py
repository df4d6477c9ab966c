#!/usr/bin/env python3
"""Generate Parla's voice catalog (voices/espeak-ng/*.json, voices/defaults.json)
from the installed espeak-ng's own voice list.

Run it after installing a different espeak-ng:  python3 scripts/generate-voices.py
After editing the JSON files by hand:           python3 scripts/generate-voices.py --index-only
The hand-chosen defaults (which voice serves a bare language, which language an
ambiguous script means) live in HAND_LANGUAGE_DEFAULTS and SCRIPT_DEFAULTS below.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "voices")

# Bare language -> preferred voice identifier, where the engine's own priority is not what
# users expect (espeak-ng prefers British English for "en", for example).
HAND_LANGUAGE_DEFAULTS = {
    "en": "espeak-ng.en-us",
    "zh": "espeak-ng.cmn",
    "cmn": "espeak-ng.cmn",
    "pt": "espeak-ng.pt",
    "pt-br": "espeak-ng.pt-br",
    "es": "espeak-ng.es",
    "fr": "espeak-ng.fr",
    "hy": "espeak-ng.hy",
    "fa": "espeak-ng.fa",
    "vi": "espeak-ng.vi",
    "nb": "espeak-ng.nb",
    "no": "espeak-ng.nb",
    "ms": "espeak-ng.ms",
}

# ISO 15924 script -> the language it means when nothing else decides.
SCRIPT_DEFAULTS = {
    "Latn": "en", "Cyrl": "ru", "Arab": "ar", "Grek": "el", "Hebr": "he",
    "Hani": "zh", "Hira": "ja", "Kana": "ja", "Jpan": "ja", "Hang": "ko",
    "Deva": "hi", "Beng": "bn", "Gujr": "gu", "Guru": "pa", "Orya": "or",
    "Taml": "ta", "Telu": "te", "Knda": "kn", "Mlym": "ml", "Sinh": "si",
    "Thai": "th", "Mymr": "my", "Geor": "ka", "Armn": "hy", "Ethi": "am",
    "Cher": "chr",
}


def normalize_tag(raw):
    parts = re.split(r"[-_]", raw.strip())
    out = [parts[0].lower()]
    singleton = False
    for i, p in enumerate(parts[1:]):
        if singleton:
            out.append(p.lower())
        elif len(p) == 1:
            singleton = True
            out.append(p.lower())
        elif len(p) == 4 and p[0].isalpha() and i < 2:
            out.append(p[0].upper() + p[1:].lower())
        elif len(p) == 2 and p.isalpha():
            out.append(p.upper())
        else:
            out.append(p.lower())
    return "-".join(out)


def espeak_list(arg):
    text = subprocess.run(["espeak-ng", arg], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in text.splitlines()[1:]:
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*(.*)$", line)
        if not m:
            sys.exit(f"cannot parse espeak-ng voice line: {line!r}")
        pty, lang, agegender, name, path, other = m.groups()
        others = [(normalize_tag(l), int(p)) for l, p in re.findall(r"\((\S+) (\d+)\)", other)]
        rows.append(dict(priority=int(pty), language=lang, gender=agegender.split("/")[-1],
                         name=name.replace("_", " "), file=path, others=others))
    return rows


def main():
    gender = {"M": "male", "F": "female"}
    voices = espeak_list("--voices")
    variants = sorted({r["file"].split("/")[-1] for r in espeak_list("--voices=variant")}, key=str.lower)
    target = os.path.join(OUT, "espeak-ng")
    os.makedirs(target, exist_ok=True)
    for f in os.listdir(target):
        if f.endswith(".json"):
            os.remove(os.path.join(target, f))

    best = {}  # lowercased language -> (priority, identifier)
    for v in voices:
        ident = "espeak-ng." + v["file"].split("/")[-1].lower()
        languages = [(normalize_tag(v["language"]), v["priority"])] + v["others"]
        preset = {
            "identifier": ident,
            "name": v["name"],
            "engine": "espeak-ng",
            "engineVoice": v["file"].split("/")[-1],
            "languages": [l for l, _ in languages],
        }
        if v["gender"] in gender:
            preset["gender"] = gender[v["gender"]]
        with open(os.path.join(target, ident.split(".", 1)[1] + ".json"), "w") as fh:
            json.dump(preset, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        for lang, pty in languages:
            key = lang.lower()
            if key not in best or pty < best[key][0]:
                best[key] = (pty, ident)
            primary = key.split("-")[0]
            if primary not in best or pty + 100 < best[primary][0]:
                best[primary] = (pty + 100, ident)

    defaults = {k: ident for k, (_, ident) in sorted(best.items())}
    defaults.update(HAND_LANGUAGE_DEFAULTS)
    known = {"espeak-ng." + v["file"].split("/")[-1].lower() for v in voices}
    for lang, ident in HAND_LANGUAGE_DEFAULTS.items():
        if ident not in known:
            sys.exit(f"hand-chosen default {lang} -> {ident} names a voice espeak-ng does not have")
    with open(os.path.join(OUT, "defaults.json"), "w") as fh:
        json.dump({"languages": dict(sorted(defaults.items())), "scripts": SCRIPT_DEFAULTS,
                   "variants": variants}, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    print(f"wrote {len(voices)} voice presets, {len(defaults)} language defaults, {len(variants)} variants to {OUT}")
    write_index()


def write_index():
    """voices/index.tsv: the presets and defaults in one file Parla reads at start instead of
    decoding every JSON file (a test checks that both give the same catalog). One line each:
    voice<TAB>identifier<TAB>name<TAB>engine<TAB>engineVoice<TAB>variant<TAB>languages (space
    separated)<TAB>gender<TAB>rate<TAB>pitch; default<TAB>language<TAB>identifier;
    script<TAB>code<TAB>language; variant<TAB>name."""
    lines = ["# Generated by scripts/generate-voices.py from voices/defaults.json and voices/*/*.json: do not edit."]
    with open(os.path.join(OUT, "defaults.json")) as fh:
        d = json.load(fh)
    for sub in sorted(os.listdir(OUT)):
        path = os.path.join(OUT, sub)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(path, name)) as fh:
                v = json.load(fh)
            fields = [v["identifier"], v["name"], v.get("engine", "espeak-ng"), v["engineVoice"], v.get("variant") or "",
                      " ".join(v["languages"]), v.get("gender") or "", str(v.get("rate", "")), str(v.get("pitch", ""))]
            assert all("\t" not in f and "\n" not in f for f in fields), v
            lines.append("voice\t" + "\t".join(fields))
    lines += [f"default\t{k}\t{v}" for k, v in d["languages"].items()]
    lines += [f"script\t{k}\t{v}" for k, v in (d.get("scripts") or {}).items()]
    lines += [f"variant\t{v}" for v in (d.get("variants") or [])]
    with open(os.path.join(OUT, "index.tsv"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--index-only"]:
        write_index()
    else:
        main()
