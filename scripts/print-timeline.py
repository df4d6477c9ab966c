#!/usr/bin/env python3
"""Prints a `parla say --timings` JSON file (or standard input) as a readable timeline."""
import json
import sys

t = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
for s in t["segments"]:
    print("segment %8.1f-%8.1f ms  %-3s %s" % (s["startMs"], s["endMs"], s["language"], s["voice"]))
for w in t["words"]:
    print("  word %8.1f-%8.1f ms  [%d, %d)  %s%s" % (w["startMs"], w["endMs"], w["start"], w["end"], w["word"],
                                                   "  (estimated)" if w["estimated"] else ""))
