"""Synthetic group-event logs: realistic version-2 logs (``docs/events.md``) of any size, without a broker.

A quarter of the groups are KIP-848 consumer groups (``synthetic/modern.py``), the rest classic groups, eager or
cooperative (``synthetic/coordinator.py``).

The analytics job's tests and its scale benchmark need logs of millions of events that look like what a real
broker writes. This module is the entry: ``generate`` (the API), the processes that write several files at once,
and the command line (``python -m broker.analytics.generate``, ``group-broker generate-events``). The simulation
that writes one file is ``broker.analytics.synthetic``: what it models is listed in ``synthetic/scenario.py``.

Each file is one broker's log: with several files, each broker coordinates its own groups over the same span of
time, as Kafka spreads groups over coordinators. Everything is deterministic for a seed. No Spark here:
generation must not need it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from broker.analytics.synthetic.scenario import SimulatedBroker
from broker.analytics.synthetic.share import ShareTraffic
from broker.analytics.synthetic.world import P_CONSUMER_GROUP, TOPICS, Group, group_ids

__all__ = ["GenerateResult", "add_arguments", "add_options", "generate", "main", "run"]

#: 2026-01-01T00:00:00Z: where the logs' clock starts unless told otherwise.
DEFAULT_START_MS = 1_767_225_600_000
#: Seconds between progress lines; a run shorter than this prints none.
PROGRESS_EVERY_S = 1.0
PROGRAM = "generate-events"

#: In a worker process (``jobs`` > 1): the events written so far by every worker, a shared counter.
_shared: Any = None


@dataclass
class GenerateResult:
    """What ``generate`` wrote."""

    paths: list[Path]
    events: int
    bad_lines: int
    bytes: int
    seconds: float
    runs: int
    groups: int

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


def _generate_one(
    path: str,
    events: int,
    groups: int,
    seed: int,
    index: int,
    files: int,
    restarts: int,
    bad_lines: int,
    start_ms: int,
    consumer_share: float,
    share_groups: int = 0,
    add: Callable[[int], None] | None = None,
) -> tuple[int, int, int, int]:
    rng = random.Random(f"{seed}:{index}")
    group_list = [Group(gid, rng, consumer_share) for gid in group_ids(groups, index, files)]
    broker = SimulatedBroker(Path(path), rng, group_list, events, restarts, bad_lines, start_ms)
    if share_groups:  # their own random source: the other groups' log is the same with or without them
        share_ids = [f"share-{gid}" for gid in group_ids(share_groups, index, files)]
        broker.share = ShareTraffic(random.Random(f"{seed}:{index}:share"), share_ids, list(TOPICS), broker.emit_js)
    if add is None and _shared is not None:
        add = _add_shared
    if add is not None:
        broker.tally = _deltas(add)
    broker.run()
    return broker.count, broker.bad, broker.bytes, broker.runs


def _deltas(add: Callable[[int], None]) -> Callable[[int], None]:
    """A broker's running count of events as increments, for a counter several files add to."""
    last = 0

    def tally(count: int) -> None:
        nonlocal last
        add(count - last)
        last = count

    return tally


def _init_worker(counter: Any) -> None:
    global _shared
    _shared = counter


def _add_shared(n: int) -> None:
    with _shared.get_lock():
        _shared.value += n


class Counter:
    """The events written so far, in this process: the generating thread adds, the progress thread reads."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n  # one writer thread: no lock needed for the reader's occasional, approximate look


class ProgressLines:
    """A line on ``stream`` every ``every_s`` while generation runs: events written so far and the rate.

    Nothing for a run shorter than ``every_s``. A daemon thread reads ``written`` (a count the generation adds
    to), so the generating loop pays one call per write of a few thousand lines, nothing per event.
    """

    def __init__(self, written: Callable[[], int], target: int, stream: TextIO, every_s: float | None = None) -> None:
        self.written = written
        self.target = target
        self.stream = stream
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="generate-progress", daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> ProgressLines:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            n = self.written()
            seconds = time.monotonic() - self._started
            share = f" ({100 * n / self.target:.0f}%)" if self.target else ""
            print(
                f"{PROGRAM}: {n:,} of ~{self.target:,} events{share}, {n / seconds:,.0f} events/s",
                file=self.stream,
                flush=True,
            )
            self.lines += 1


def generate(
    path: str | os.PathLike[str],
    events: int,
    groups: int | None = None,
    seed: int = 0,
    *,
    files: int = 1,
    restarts: int = 1,
    bad_lines: int = 0,
    start_ms: int = DEFAULT_START_MS,
    jobs: int = 1,
    consumer_share: float = P_CONSUMER_GROUP,
    share_groups: int = 0,
    progress: TextIO | None = None,
) -> GenerateResult:
    """Write a synthetic event log (the format version of ``broker/events/names.py``) of about ``events`` events
    (it ends at a step boundary), classic and consumer groups.

    With ``files`` 1, ``path`` is the file; otherwise it is a directory that gets ``events-00000.jsonl`` and on,
    each one broker's log with its share of the events and of the ``groups`` (default: one per 500 events,
    at least 3 per file). ``restarts`` is the number of broker restarts in each file (each starts a new run);
    ``bad_lines`` the number of malformed lines mixed into each file, for the reader's input report. ``jobs``
    writes that many files at once, in separate processes. ``consumer_share``: the share of the groups that are
    KIP-848 consumer groups (0 to 1). ``share_groups``: KIP-932 share groups in all, beside the ``groups``
    (``synthetic/share.py``; none by default: a log without them is byte for byte the one before issue 28, and
    their events count toward ``events``). ``progress``: where to write a line a second while it runs (events so
    far, the rate; nothing if it takes less), or None for none.
    """
    if events < 1:
        raise ValueError("events must be at least 1")
    if not 0 <= consumer_share <= 1:
        raise ValueError("consumer_share must be between 0 and 1")
    if files < 1:
        raise ValueError("files must be at least 1")
    target = Path(path)
    if files == 1:
        target.parent.mkdir(parents=True, exist_ok=True)
        paths = [target]
    else:
        target.mkdir(parents=True, exist_ok=True)
        paths = [target / f"events-{k:05d}.jsonl" for k in range(files)]
    total_groups = groups if groups is not None else max(3 * files, min(20_000, events // 500))
    shares = [events * (k + 1) // files - events * k // files for k in range(files)]
    group_shares = [total_groups * (k + 1) // files - total_groups * k // files for k in range(files)]
    if share_groups < 0:
        raise ValueError("share_groups must be at least 0")
    share_shares = [share_groups * (k + 1) // files - share_groups * k // files for k in range(files)]
    tasks = [
        (
            str(p),
            max(shares[k], 1),
            max(group_shares[k], 1),
            seed,
            k,
            files,
            restarts,
            bad_lines,
            start_ms,
            consumer_share,
            share_shares[k],
        )
        for k, p in enumerate(paths)
    ]
    started = time.perf_counter()
    parallel = jobs > 1 and files > 1
    # Progress: the workers add to a counter shared between processes, or the one loop here to a plain one.
    shared = multiprocessing.Value("q", 0) if parallel and progress is not None else None
    local = Counter()
    written: Callable[[], int] = (lambda: int(shared.value)) if shared is not None else (lambda: local.value)
    reporting: AbstractContextManager[object] = (
        ProgressLines(written, sum(t[1] for t in tasks), progress) if progress is not None else nullcontext()
    )
    with reporting:
        if parallel:
            workers = min(jobs, files)
            with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(shared,)) as pool:
                results = list(pool.map(_generate_one_args, tasks))
        else:
            add = local.add if progress is not None else None
            results = [_generate_one(*task, add) for task in tasks]
    seconds = time.perf_counter() - started
    return GenerateResult(
        paths=paths,
        events=sum(r[0] for r in results),
        bad_lines=sum(r[1] for r in results),
        bytes=sum(r[2] for r in results),
        seconds=seconds,
        runs=sum(r[3] for r in results),
        groups=total_groups,
    )


def _generate_one_args(
    task: tuple[str, int, int, int, int, int, int, int, int, float, int],
) -> tuple[int, int, int, int]:
    return _generate_one(*task)


# -- command line -----------------------------------------------------------------------------------------


def add_options(parser: argparse.ArgumentParser) -> None:
    """The generator's tuning flags (what ``group-broker analyze --generate N`` adds to its own)."""
    parser.add_argument("--groups", type=int, default=None, help="groups in all (default: one per 500 events)")
    parser.add_argument("--seed", type=int, default=0, help="the same seed writes the same log (default 0)")
    parser.add_argument("--files", type=int, default=1, help="split into K files, one broker each (OUT is a directory)")
    parser.add_argument("--restarts", type=int, default=1, help="broker restarts in each file (default 1)")
    parser.add_argument("--bad-lines", type=int, default=0, help="malformed lines to mix into each file (default 0)")
    parser.add_argument("--start-ms", type=int, default=DEFAULT_START_MS, help="the logs' first timestamp")
    parser.add_argument("--jobs", type=int, default=1, help="write this many files at once (processes; default 1)")
    parser.add_argument(
        "--consumer-share", type=float, default=P_CONSUMER_GROUP, metavar="P",
        help=f"share of the groups that are KIP-848 consumer groups (default {P_CONSUMER_GROUP})",
    )  # fmt: skip
    parser.add_argument(
        "--share-groups", type=int, default=0, metavar="N",
        help="KIP-932 share groups in all, beside --groups (default 0): deliveries, releases, lock expiries",
    )  # fmt: skip
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="a line a second on stderr while it runs (default: when stderr is a terminal)",
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything ``run`` reads: OUT, ``--events`` and the options."""
    parser.add_argument("out", metavar="OUT", help="the log file, or the directory with --files > 1")
    parser.add_argument("--events", type=int, required=True, help="about this many events (ends at a step boundary)")
    add_options(parser)


def run(
    args: argparse.Namespace, out: str | os.PathLike[str] | None = None, events: int | None = None
) -> GenerateResult:
    """Generate from parsed arguments and say what was written on stderr.

    ``out`` and ``events`` default to ``args.out`` and ``args.events`` (what ``add_arguments`` adds); a command
    with flags of its own (``group-broker analyze --generate N``) passes them and adds only ``add_options``.
    """
    target = args.out if out is None else out
    wanted = getattr(args, "progress", None)
    progress = sys.stderr if (wanted if wanted is not None else sys.stderr.isatty()) else None
    result = generate(
        target,
        args.events if events is None else events,
        args.groups,
        args.seed,
        files=args.files,
        restarts=args.restarts,
        bad_lines=args.bad_lines,
        start_ms=args.start_ms,
        jobs=args.jobs,
        consumer_share=args.consumer_share,
        share_groups=getattr(args, "share_groups", 0),
        progress=progress,
    )
    where = str(result.paths[0]) if len(result.paths) == 1 else f"{len(result.paths)} files in {target}"
    print(
        f"wrote {result.events:,} events ({result.bad_lines} bad lines, {result.runs} runs, {result.groups} groups, "
        f"{result.bytes / 1e6:,.1f} MB) to {where} in {result.seconds:.1f} s: "
        f"{result.events_per_second:,.0f} events/s",
        file=sys.stderr,
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m broker.analytics.generate",
        description="Write a realistic synthetic group-event log (docs/events.md): classic and consumer groups.",
    )
    add_arguments(parser)
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
