"""parla.render and parla.merge: the parla program's renderer from Python (PARLA_CLI is the
program, as scripts/check-python sets it)."""

import json
import os
import subprocess

import pytest

import parla

ITEMS = [
    ("a1", "en", "Hello world, this is a batch."),
    ("a2", "el", "Καλημέρα κόσμε, τι κάνεις;"),
    ("a3", "fr", "Le café est prêt, viens vite !"),
    ("a4", "en", "One more line, with a comma."),
]


@pytest.fixture(autouse=True)
def program(monkeypatch):
    cli = os.environ.get("PARLA_CLI")
    assert cli, "set PARLA_CLI to the parla program (scripts/check-python does)"
    monkeypatch.setenv("PARLA_PROGRAM", cli)
    return cli


def files(directory):
    return {n: open(os.path.join(directory, n), "rb").read() for n in sorted(os.listdir(directory)) if n.endswith((".wav", ".json"))}


def test_render_yields_each_item_and_writes_what_the_command_writes(tmp_path, program):
    out = tmp_path / "py"
    results = list(parla.render(ITEMS, out, jobs=2, timings=True))
    assert sorted(r.id for r in results) == ["a1", "a2", "a3", "a4"]
    assert all(r.status == "ok" and r.error is None for r in results), results
    assert results[-1].done == 4 and results[-1].audio_seconds > 3
    # The command on the same items gives the same bytes.
    source = tmp_path / "items.jsonl"
    source.write_text("".join(json.dumps({"id": i, "language": l, "text": t}, ensure_ascii=False) + "\n" for i, l, t in ITEMS), encoding="utf-8")
    subprocess.run([program, "render", str(source), "-o", str(tmp_path / "cli"), "--timings", "--progress", "none"], check=True, capture_output=True)
    assert files(out) == files(tmp_path / "cli")
    # A second run skips what is done.
    again = list(parla.render(ITEMS, out, timings=True))
    assert [r.status for r in again] == ["skipped"] * 4


def test_a_failed_item_is_a_result_and_bad_arguments_raise(tmp_path):
    results = list(parla.render([{"id": "good", "text": "Fine."}, {"id": "bad", "text": "No.", "voice": "espeak-ng.nope"}], tmp_path / "out"))
    by_id = {r.id: r for r in results}
    assert by_id["good"].status == "ok"
    assert by_id["bad"].status == "failed" and "espeak-ng.nope" in (by_id["bad"].error or "")
    with pytest.raises(parla.InvalidArgumentError):
        parla.render(ITEMS, tmp_path / "x", jobs=0)
    with pytest.raises(parla.InvalidArgumentError):
        parla.render(ITEMS, tmp_path / "x", shard=(2, 2))
    with pytest.raises(parla.InvalidArgumentError):
        list(parla.render([("only-an-id",)], tmp_path / "x"))  # type: ignore[list-item]
    with pytest.raises(parla.FileError):
        parla.render(tmp_path / "missing.tsv", tmp_path / "x")


def test_shards_merge_and_other_settings_are_refused(tmp_path):
    source = tmp_path / "items.tsv"
    source.write_text("".join(f"{i}\t{l}\t{t}\n" for i, l, t in ITEMS), encoding="utf-8")
    out = tmp_path / "shared"
    first = list(parla.render(source, out, shard=(0, 2), isolate=True))
    early = parla.merge(source, out, isolate=True)
    assert not early.complete and any("results-1-of-2.jsonl" in p for p in early.problems), early
    second = list(parla.render(source, out, shard=(1, 2), isolate=True))
    assert sorted(r.id for r in first + second) == ["a1", "a2", "a3", "a4"]
    report = parla.merge(source, out, isolate=True, dataset=False)
    assert report.complete and "4 items: 4 rendered" in report.summary, report
    ids = [json.loads(line)["id"] for line in open(out / "results.jsonl", encoding="utf-8")]
    assert ids == ["a1", "a2", "a3", "a4"]
    with pytest.raises(parla.Error, match="other settings"):
        list(parla.render(source, out, shard=(1, 2)))


def test_a_data_set_has_a_row_per_item(tmp_path):
    out = tmp_path / "data"
    assert all(r.status == "ok" for r in parla.render(ITEMS, out, dataset=True))
    rows = [json.loads(line) for line in open(out / "metadata.jsonl", encoding="utf-8")]
    assert [r["id"] for r in rows] == ["a1", "a2", "a3", "a4"]
    for row, (_, language, text) in zip(rows, ITEMS):
        assert row["text"] == text and row["language"] == language and row["file_name"] == row["id"] + ".wav"
        assert all(text[w["char_start"] : w["char_end"]] == w["word"] for w in row["words"])
