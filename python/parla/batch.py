"""Batch rendering from Python: the same renderer as ``parla render`` (the same bytes), with
each item's result as it finishes.

    import parla

    for result in parla.render([("a1", "Hello world."), ("a2", "Καλημέρα κόσμε.")], "out"):
        print(result.id, result.status, result.error)

Items are rendered by the ``parla`` program (``$PARLA_PROGRAM``, else ``parla`` on ``PATH``:
the .deb or ``scripts/install`` puts it there; the wheel does not carry it), in worker
processes on every core. Everything ``parla render`` promises holds: files appear complete or not at all, a rerun resumes, shards of one
job may share ``output_dir``, and :func:`merge` finishes a sharded run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Optional, Union

from . import Error, FileError, InvalidArgumentError

PathLike = Union[str, "os.PathLike[str]"]
Item = Union[Mapping[str, object], "tuple[str, str]", "tuple[str, str, str]"]
Status = Literal["ok", "failed", "skipped"]

__all__ = ["MergeReport", "RenderResult", "merge", "program", "render"]


@dataclass(frozen=True)
class RenderResult:
    """One item's end: ``ok`` (rendered now), ``skipped`` (done by an earlier run) or
    ``failed`` (``error`` says why). ``done``, ``failed`` and ``skipped`` count the run so far."""

    id: str
    status: Status
    error: Optional[str]
    done: int
    failed: int
    skipped: int
    audio_seconds: float
    elapsed_seconds: float


@dataclass(frozen=True)
class MergeReport:
    """What :func:`merge` found: ``complete`` when every item is rendered exactly once;
    ``summary`` is its last line, ``problems`` the lines naming items."""

    complete: bool
    summary: str
    problems: "list[str]"


def program() -> str:
    """The ``parla`` program batch rendering runs; raises :class:`parla.Error` if there is none."""
    explicit = os.environ.get("PARLA_PROGRAM")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise Error(f"PARLA_PROGRAM is {explicit}, which is not an executable program")
        return explicit
    found = shutil.which("parla")
    if found:
        return found
    raise Error(
        "batch rendering needs the parla program, which the wheel does not carry: install Parla "
        "(the .deb, or scripts/install), or set PARLA_PROGRAM to its path"
    )


def _options(
    jobs: Optional[int],
    shard: "Optional[tuple[int, int]]",
    isolate: bool,
    timings: bool,
    dataset: bool,
    voice: Optional[str],
    language: Optional[str],
    prefer_voices: Optional[Mapping[str, str]],
) -> "list[str]":
    args = []
    if jobs is not None:
        if jobs < 1:
            raise InvalidArgumentError(f"jobs must be at least 1 (got {jobs})")
        args += ["--jobs", str(jobs)]
    if shard is not None:
        k, n = shard
        if not 0 <= k < n:
            raise InvalidArgumentError(f"shard must be (k, n) with 0 <= k < n (got {shard})")
        args += ["--shard", f"{k}/{n}"]
    if isolate:
        args.append("--isolate")
    if timings:
        args.append("--timings")
    if dataset:
        args.append("--dataset")
    if voice:
        args += ["--voice", voice]
    if language:
        args += ["--language", language]
    for tag, name in (prefer_voices or {}).items():
        args += ["--prefer-voice", f"{tag}={name}"]
    return args


def _write_items(items: Iterable[Item], path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for n, item in enumerate(items, 1):
            if isinstance(item, tuple):
                if len(item) == 2:
                    entry: "dict[str, object]" = {"id": item[0], "text": item[1]}
                elif len(item) == 3:
                    entry = {"id": item[0], "language": item[1], "text": item[2]}
                else:
                    raise InvalidArgumentError(f"item {n}: a tuple is (id, text) or (id, language, text), not {len(item)} values")
            elif isinstance(item, Mapping):
                entry = dict(item)
                if "id" not in entry or "text" not in entry:
                    raise InvalidArgumentError(f"item {n}: a mapping needs 'id' and 'text' (got {sorted(entry)})")
            else:
                raise InvalidArgumentError(f"item {n}: give a mapping or an (id, text) tuple, not {type(item).__name__}")
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


def render(
    items: Union[PathLike, Iterable[Item]],
    output_dir: PathLike,
    *,
    jobs: Optional[int] = None,
    shard: "Optional[tuple[int, int]]" = None,
    isolate: bool = False,
    timings: bool = False,
    dataset: bool = False,
    voice: Optional[str] = None,
    language: Optional[str] = None,
    prefer_voices: Optional[Mapping[str, str]] = None,
) -> Iterator[RenderResult]:
    """Renders ``items`` into ``output_dir`` (``ID.wav``, and ``ID.json`` with ``timings``),
    yielding each item's result as it finishes.

    ``items`` is an input file ``parla render`` reads (text, .tsv, .jsonl, or a directory of
    .txt files), or an iterable of ``(id, text)`` or ``(id, language, text)`` tuples or of
    mappings with ``id`` and ``text`` (and ``language``, ``voice``, ``rate``, ``pitch``,
    ``ssml``, as in a .jsonl line). ``jobs``: worker processes (default: one per core);
    ``shard=(k, n)``: only shard k of n (results in ``results-k-of-n.jsonl``); ``isolate``,
    ``dataset``, ``voice``, ``language`` and ``prefer_voices`` (``{"en": "piper.…"}``) are
    ``parla render``'s options of the same names.

    A failed item is a result, not an exception; :class:`parla.Error` is raised when the
    batch itself cannot run (no ``parla``, an unwritable directory, settings that differ from
    those ``output_dir`` was rendered with). Stopping the iteration early (``break``, Ctrl-C)
    stops the renderer after the items in flight; a rerun resumes.
    """
    # Checked now, not at the first result.
    options = _options(jobs, shard, isolate, timings, dataset, voice, language, prefer_voices)
    command = program()
    if isinstance(items, (str, os.PathLike)):
        if not os.path.exists(os.fspath(items)):
            raise FileError(f"the input {os.fspath(items)} does not exist")
        return _run([command, "render", os.fspath(items), "-o", os.fspath(output_dir), "--progress", "json"] + options)
    return _run_items(items, [command, "render"], ["-o", os.fspath(output_dir), "--progress", "json"] + options)


def _run_items(items: Iterable[Item], head: "list[str]", tail: "list[str]") -> Iterator[RenderResult]:
    """The items written to a temporary .jsonl file, which parla renders (it reads a file twice
    for a data set)."""
    fd, path = tempfile.mkstemp(prefix="parla-items-", suffix=".jsonl")
    os.close(fd)
    try:
        _write_items(items, path)
        yield from _run(head + [path] + tail)
    finally:
        os.unlink(path)


def _run(args: "list[str]") -> Iterator[RenderResult]:
    child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    assert child.stderr is not None
    errors: "dict[str, str]" = {}
    other: "list[str]" = []
    last = {"done": 0, "failed": 0, "skipped": 0}
    finished = False
    try:
        for line in child.stderr:
            line = line.rstrip("\n")
            if line.startswith("error: item "):
                ident, _, message = line[len("error: item ") :].partition(": ")
                errors[ident] = message
                continue
            if not line.startswith("{"):
                other.append(line)
                continue
            try:
                p = json.loads(line)
            except ValueError:
                other.append(line)
                continue
            status: Status = "ok"
            for key in ("failed", "skipped", "done"):
                if p.get(key, 0) > last[key]:
                    status = "ok" if key == "done" else key  # type: ignore[assignment]
            last = {k: p.get(k, 0) for k in last}
            ident = p.get("id", "")
            yield RenderResult(
                id=ident,
                status=status,
                error=errors.pop(ident, None) if status == "failed" else None,
                done=last["done"],
                failed=last["failed"],
                skipped=last["skipped"],
                audio_seconds=float(p.get("audio_s", 0.0)),
                elapsed_seconds=float(p.get("elapsed_s", 0.0)),
            )
        code = child.wait()
        finished = True
    finally:
        if not finished:
            # The caller stopped early (break, an exception, Ctrl-C): parla finishes the items in
            # flight and exits; a rerun resumes.
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    # 0: every item rendered; 1: some failed (each reported above), or the batch itself failed
    # ("Error: …", as for settings that differ from the directory's); others: the batch failed.
    fatal = [line for line in other if line.startswith("Error:")]
    if code not in (0, 1) or fatal:
        message = "\n".join(fatal or [line for line in other if line.strip()])[-2000:]
        raise Error(f"parla render failed (exit status {code}): {message or 'no message'}")


def merge(
    items: PathLike,
    output_dir: PathLike,
    *,
    isolate: bool = False,
    dataset: bool = False,
    voice: Optional[str] = None,
    language: Optional[str] = None,
    prefer_voices: Optional[Mapping[str, str]] = None,
) -> MergeReport:
    """``parla render ITEMS -o OUTPUT_DIR --merge``: checks that every item of the input file
    ``items`` is rendered exactly once by the shards that share ``output_dir``, and writes
    ``results.jsonl`` in input order (and ``metadata.jsonl`` with ``dataset``). Give the
    options the shards were rendered with. Audio is never changed."""
    args = [program(), "render", os.fspath(items), "-o", os.fspath(output_dir), "--merge"]
    args += _options(None, None, isolate, False, dataset, voice, language, prefer_voices)
    done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, encoding="utf-8")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode not in (0, 1):
        raise Error(f"parla render --merge failed (exit status {done.returncode}): {' '.join(lines)[-2000:]}")
    return MergeReport(complete=done.returncode == 0, summary=lines[-1] if lines else "", problems=lines[:-1])

