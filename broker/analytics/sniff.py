"""A look at local inputs before Spark starts: is any line an event record, and if not, what are they?

``group-broker analyze`` reads the first ``SAMPLE_BYTES`` of each local file (through gzip or bzip2 for the
names Hadoop reads through those codecs), at most ``MAX_FILES`` of them, and refuses the run when no sampled line
is an event record of the format: a JSON object with an integer version ``v`` and an event name the format
knows (``broker/events/names.py``). The broker's own log (``serve --log-format json``: structlog's JSON, whose
message is also called ``event``) is the input most easily taken for an event log; a chaos run's ``--json``
report, the job's own ``summary.json``, Markdown and binary files are named too (issue 26). No pyspark here.

Only a sure answer refuses: a URI other than ``file:``, a Hadoop-only glob (``{a,b}``), a codec Python cannot
read (``.lz4``, ``.snappy``, ``.zst``, ...) or more than ``MAX_FILES`` files leave the question to the job, whose
input report says what every line was.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.events.names import EVENTS

#: Bytes read from the start of each file (after decompression).
SAMPLE_BYTES = 64 * 1024
#: Files looked at, at most; with more, the job decides.
MAX_FILES = 256
#: Suffixes Hadoop reads through a codec that the look cannot: such a file is left to the job.
OTHER_CODECS = (".deflate", ".lz4", ".snappy", ".zst", ".xz", ".zstd")
GZIP_MAGIC = b"\x1f\x8b"

#: What a file that holds no event line looks like, in the words of the error message.
LOOKS = {
    "empty": "is empty (no lines at all)",
    "broker_log": (
        "looks like the broker's own log (structlog JSON: has `event` and `level`, no `v`); pass the event log "
        "(serve --event-log) instead"
    ),
    "chaos_report": "looks like a chaos run's JSON report (--json), not an event log",
    "summary": "looks like a summary.json / analyze output, not an event log",
    "parquet": "looks like a Parquet file (analyze output?), not an event log",
    "html": "looks like an HTML page (the analyze report?), not an event log",
    "gzip_unnamed": "looks like gzip-compressed data, but its name does not end in .gz (Spark decompresses only those)",
    "binary": "looks binary/gzip?, not text (a compressed file under another name?)",
    "json": "looks like a JSON document, not one event record per line",
    "json_lines": "has JSON lines, but none is an event record (an integer `v` and a known `event`)",
    "text": "looks like Markdown/text: no line is a JSON object",
    "mostly_text": "looks like Markdown/text: most lines are not JSON objects, and none that is is an event record",
}


@dataclass(frozen=True)
class Look:
    """One file's sample: what it looks like (a key of ``LOOKS``, or ``events``) and its lines sampled."""

    path: str
    kind: str
    lines: int


def is_event(record: object) -> bool:
    """A JSON value that is an event record: an object with an integer ``v`` and an event name of the format."""
    if not isinstance(record, dict):
        return False
    version = record.get("v")
    return isinstance(version, int) and not isinstance(version, bool) and version >= 1 and record.get("event") in EVENTS


def _files(patterns: Sequence[str]) -> list[Path] | None:
    """The local files the patterns name (directories walked, hidden ``_``/``.`` names skipped as Hadoop does),
    or None when the look cannot be sure (a remote URI, Hadoop glob syntax, too many files)."""
    files: list[Path] = []
    for pattern in patterns:
        local = re.sub(r"^file:(//)?", "", pattern) if pattern.startswith("file:") else pattern
        if "://" in local or "{" in local:
            return None
        for name in sorted(glob.glob(local)):
            path = Path(name)
            if path.is_dir():
                for root, dirs, names in os.walk(path):
                    dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                    files += [Path(root) / n for n in sorted(names) if not n.startswith(("_", "."))]
            elif path.is_file():
                files.append(path)
            else:
                return None
            if len(files) > MAX_FILES:
                return None
    return files


def _sample(path: Path) -> tuple[bytes, bool] | None:
    """The file's first ``SAMPLE_BYTES`` as Spark will read them, and whether that is all of it; None when they
    cannot be read here."""
    name = path.name.lower()
    if name.endswith(OTHER_CODECS):
        return None
    try:
        if name.endswith(".gz"):
            with gzip.open(path, "rb") as packed:
                data = packed.read(SAMPLE_BYTES + 1)
        elif name.endswith(".bz2"):
            with bz2.open(path, "rb") as packed:
                data = packed.read(SAMPLE_BYTES + 1)
        else:
            with path.open("rb") as raw:
                data = raw.read(SAMPLE_BYTES + 1)
    except (OSError, EOFError, zlib.error, ValueError):  # a corrupt or truncated archive: the job says more
        return None
    return data[:SAMPLE_BYTES], len(data) <= SAMPLE_BYTES


def _records(lines: Sequence[str]) -> Iterator[object]:
    for line in lines:
        text = line.strip()
        if text.startswith("{"):
            try:
                yield json.loads(text)
            except ValueError:
                continue


def classify(data: bytes, whole: bool) -> tuple[str, int]:
    """What a sample is (``events`` or a key of ``LOOKS``) and how many lines it has (the last cut one aside)."""
    if not data.strip():
        return "empty", 0
    if data.startswith(b"PAR1"):
        return "parquet", 0
    if data.startswith(GZIP_MAGIC):
        return "gzip_unnamed", 0
    if b"\x00" in data[:4096]:
        return "binary", 0
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if not whole and len(lines) > 1:
        lines = lines[:-1]  # cut by the sample
    records = list(_records(lines))
    if any(is_event(record) for record in records):
        return "events", len(lines)
    head = text.lstrip()
    if head.lower().startswith(("<!doctype html", "<html")):
        return "html", len(lines)
    if head.startswith("{") and not records:  # one document over many lines (pretty-printed JSON)
        if re.search(r'"chaos_started_at"\s*:|"kills"\s*:', text) or (
            re.search(r'"ok"\s*:', text) and re.search(r'"workdir"\s*:', text)  # a run that failed early
        ):
            return "chaos_report", len(lines)
        if '"format_version"' in text and re.search(r'"(input_kinds|overall|shuffle_partitions)"', text):
            return "summary", len(lines)
        return "json", len(lines)
    objects = [r for r in records if isinstance(r, dict)]
    if any("event" in r and "level" in r and "v" not in r for r in objects):
        return "broker_log", len(lines)
    if len(records) == 1 and len(lines) == 1 and isinstance(records[0], dict):
        document = records[0]  # a whole JSON document on one line
        if "chaos_started_at" in document or "kills" in document or {"ok", "workdir"} <= document.keys():
            return "chaos_report", 1
        if "format_version" in document and ("input_kinds" in document or "overall" in document):
            return "summary", 1
    if records:
        prose = sum(1 for line in lines if line.strip() and not line.lstrip().startswith("{"))
        # A README that quotes a JSON line or two is still a README (issue 26, item 5).
        return ("mostly_text" if prose > len(records) else "json_lines"), len(lines)
    return "text", len(lines)


def look(patterns: Sequence[str]) -> list[Look] | None:
    """Each local file's look, or None when the look cannot be sure of every file."""
    files = _files(patterns)
    if not files:
        return None
    looks = []
    for path in files:
        sample = _sample(path)
        if sample is None:
            return None
        kind, lines = classify(*sample)
        looks.append(Look(str(path), kind, lines))
    return looks


def no_event_message(patterns: Sequence[str], help_text: str) -> str | None:
    """Why the local inputs hold nothing to analyse, naming what each file looks like; None when some sampled line
    is an event record, or the look cannot be sure."""
    looks = look(patterns)
    if looks is None or any(found.kind == "events" for found in looks):
        return None
    where = ", ".join(patterns)
    if len(looks) == 1:
        (found,) = looks
        sampled = f" ({_lines(found.lines)} looked at)" if found.lines else ""
        return f"no event in {found.path}: it {LOOKS[found.kind]}{sampled}. {help_text}"
    by_kind: dict[str, list[str]] = {}
    for found in looks:
        by_kind.setdefault(found.kind, []).append(found.path)
    parts = []
    for kind, paths in by_kind.items():
        named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        parts.append(f"{named} {LOOKS[kind]}")
    return f"no event in the {len(looks)} files of {where}: {'; '.join(parts)}. {help_text}"


def _lines(n: int) -> str:
    return "1 line" if n == 1 else f"{n:,} lines"
