"""Render a corpus in shards on a Ray cluster (a local one here), then merge.

    python3 Examples/python/render_ray.py ITEMS.tsv OUT [SHARDS]

Each Ray task renders one shard with parla.render into OUT, which every node must see (shared
storage): the shards share the directory, each with its own results file, and a task that
Ray retries after a node failure resumes where the shard stopped. parla.merge then checks
that every item is rendered exactly once and writes OUT/results.jsonl in input order. The
parla program does the work (PARLA_PROGRAM, else parla on PATH), on the CPUs Ray gives each
task.
"""

import sys

import ray

import parla


@ray.remote(num_cpus=1, max_retries=3)
def render_shard(items: str, out: str, k: int, n: int) -> "dict[str, int]":
    counts = {"ok": 0, "failed": 0, "skipped": 0}
    for result in parla.render(items, out, shard=(k, n), jobs=1, isolate=True):
        counts[result.status] += 1
    return counts


def main() -> None:
    items, out = sys.argv[1], sys.argv[2]
    shards = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    ray.init(include_dashboard=False, log_to_driver=False)
    totals = ray.get([render_shard.remote(items, out, k, shards) for k in range(shards)])
    for k, counts in enumerate(totals):
        print(f"shard {k}/{shards}: {counts['ok']} rendered, {counts['failed']} failed, {counts['skipped']} already done")
    report = parla.merge(items, out, isolate=True)
    print(report.summary)
    for line in report.problems:
        print(line)
    ray.shutdown()
    sys.exit(0 if report.complete else 1)


if __name__ == "__main__":
    main()
