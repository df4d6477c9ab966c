#!/usr/bin/env python3
"""Counts each item's renders in a render directory's shard results files, for check-slurm.

Each shard appends a line to its results-K-of-N.jsonl when it finishes an item, and a task that
runs again (resumed, requeued) appends only for the items it renders again: so an item with two
"ok" lines, in one shard file or in two, was rendered twice. The merged results.jsonl keeps one
line per id and cannot tell.

  count_renders.py DIR EXPECTED_RESULTS   (EXPECTED_RESULTS: a results.jsonl naming every id)
Exits 1, naming the ids, if any item was rendered other than once or is missing.
  count_renders.py --done RESULTS_FILE   prints how many items it says are done (last line "ok")
"""
import collections
import json
import os
import sys


def count(directory):
    renders = collections.Counter()
    where = collections.defaultdict(set)
    for name in sorted(os.listdir(directory)):
        if not (name.startswith("results-") and name.endswith(".jsonl")):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill: not a render
                if entry.get("status") == "ok":
                    renders[entry["id"]] += 1
                    where[entry["id"]].add(name)
    return renders, where


def problems(directory, expected_ids):
    renders, where = count(directory)
    twice = sorted(i for i, n in renders.items() if n > 1)
    missing = sorted(set(expected_ids) - set(renders))
    unknown = sorted(set(renders) - set(expected_ids))
    found = []
    if twice:
        found.append(f"{len(twice)} items rendered more than once, e.g. " + ", ".join(f"{i} ({renders[i]}x in {sorted(where[i])})" for i in twice[:5]))
    if missing:
        found.append(f"{len(missing)} items never rendered, e.g. {missing[:5]}")
    if unknown:
        found.append(f"{len(unknown)} items not in the input, e.g. {unknown[:5]}")
    return renders, found


def done(path):
    last = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                last[entry["id"]] = entry.get("status")
    return sum(1 for status in last.values() if status == "ok")


if __name__ == "__main__":
    if sys.argv[1] == "--done":
        print(done(sys.argv[2]))
        sys.exit(0)
    directory, expected = sys.argv[1], sys.argv[2]
    ids = [json.loads(line)["id"] for line in open(expected, encoding="utf-8")]
    renders, found = problems(directory, ids)
    if found:
        sys.exit("error: " + "; ".join(found))
    print(f"each of {len(ids)} items rendered exactly once ({sum(renders.values())} renders in the shards' results files)", file=sys.stderr)
