"""``python -m benchmarks.fuzz``: the long fuzz campaign of issue 14 against a live broker, over real sockets.

    python -m benchmarks.fuzz --frames 200000            # the campaign the closing note reports
    python -m benchmarks.fuzz --frames 5000 --seed 3     # a short one
    python -m benchmarks.fuzz --guarded 20000            # the in-process properties (decode, handlers) instead

Prints frames sent, process deaths, internal-error tracebacks, connections closed by reason, RSS start/peak/end
and the good consumer's figures; exits 1 when anything was found. Findings come with frames (hex, size prefix
included) to replay. See benchmarks/README.md, "Fuzzing".
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.fuzz.guard import Guard, Result, minimize, minimize_session, signature
from benchmarks.fuzz.live import Options, Report, run
from benchmarks.fuzz.mutate import apply, random_mutations
from benchmarks.fuzz.requests import pick_api, valid_frame

T = TypeVar("T")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--frames", type=int, default=200_000, help="frames to send over all connections")
    add("--seed", type=int, default=14, help="seed of every random choice (frames, mutations, bursts)")
    add("--connections", type=int, default=32, help="fuzz connections at once")
    add("--rounds", type=int, default=1, help="run it again against the same broker (RSS after each round)")
    add("--mutate", type=float, default=0.75, help="share of frames that are mutated (the rest are valid)")
    add("--memory-mb", type=int, default=4096, help="RLIMIT_AS of the broker process (0: none)")
    add("--log-dir", type=Path, default=Path("fuzz-logs"), help="where the broker's logs go")
    add("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    add("--guarded", type=int, metavar="N", help="instead: N decode cases and N/5 handler sessions in the worker")
    return parser.parse_args(argv)


def print_report(report: Report, options: Options) -> None:
    rows = [
        (
            "frames sent (all rounds)",
            f"{report.frames_sent:,} ({report.mutated_sent:,} mutated, {report.stream_lies} stream lies)",
        ),
        ("bytes sent", f"{report.bytes_sent:,}"),
        ("answers read", f"{report.answers:,}"),
        (
            "connections",
            f"{report.connections:,} ({report.closed_by_broker:,} closed by the broker, "
            f"{report.burst_timeouts:,} still busy after {options.wait:.0f} s)",
        ),
        ("process deaths", str(report.deaths)),
        ("internal errors in the log", str(report.internal_errors)),
        (
            "RSS start / peak / end",
            f"{report.rss_start_kb / 1024:.1f} / {report.rss_peak_kb / 1024:.1f} / {report.rss_end_kb / 1024:.1f} MB",
        ),
        ("RSS after each round", " / ".join(f"{kb / 1024:.1f}" for kb in report.rss_rounds_kb) + " MB"),
        (
            "good consumer",
            f"{report.good_cycles} cycles, {report.good_answers:,} answers, "
            f"{len(report.good_failures)} failures, p99 {report.good_p99_ms:.1f} ms, "
            f"max {report.good_max_ms:.1f} ms",
        ),
        ("seconds", f"{report.seconds:.1f}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(
        f"fuzz campaign, seed {options.seed}, {options.frames:,} frames x {options.rounds} rounds, "
        f"{options.connections} connections"
    )
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    print("connections closed by the broker, by reason:")
    for reason, count in report.close_reasons.most_common():
        print(f"  {count:>8,}  {reason}")
    for failure in report.good_failures[:10]:
        print(f"good consumer failure: {failure}")
    for finding in report.findings[:20]:
        print(f"FINDING {finding.kind}: {finding.detail}")
        for frame in finding.frames[-3:]:
            print(f"    frame {frame[:400]}{'…' if len(frame) > 400 else ''}")


Steps = list[tuple[bytes, int]]


def guarded(cases: int, seed: int) -> int:
    """The worker's properties at scale: decode every frame, run sessions; one line per failure class, with a
    minimized reproducer."""
    r = random.Random(seed)
    classes: collections.Counter[tuple[str, str]] = collections.Counter()
    examples: dict[tuple[str, str], tuple[str, Steps, dict[str, Any]]] = {}
    with Guard() as guard:
        for case in range(cases):
            payload = apply(valid_frame(r, *pick_api(r), correlation_id=case), random_mutations(r))
            result = guard.decode(payload)
            if (found := signature(result)) is not None:
                classes[found] += 1
                examples.setdefault(found, ("decode", [(payload, 0)], result))
        for _ in range(cases // 5):
            steps: Steps = []
            for step in range(r.randint(1, 6)):
                frame = valid_frame(r, *pick_api(r), correlation_id=step)
                payload = apply(frame, random_mutations(r)) if r.random() < 0.5 else frame.payload
                steps.append((payload, r.choice((0, 0, 100, 5_000, 40_000))))
            result = guard.session(steps)
            if (found := signature(result)) is not None:
                classes[found] += 1
                examples.setdefault(found, ("session", steps, result))
        print(f"{cases} decode cases, {cases // 5} sessions: {sum(classes.values())} failures, {len(classes)} classes")
        for found, count in classes.most_common():
            op, steps, result = examples[found]
            print(f"{count:>6}  {found[0]} at {found[1]}: {result['error']['message'][:300]}")
            if op == "decode":
                small = minimize(steps[0][0], _same(found, guard.decode))
                print(f"        minimized frame: {_sized(small)}")
            else:
                shrunk = minimize_session(steps, _same(found, guard.session))
                print("        minimized session: " + " ".join(f"{_sized(f)} (+{ms} ms)" for f, ms in shrunk))
    return 1 if classes else 0


def _same(found: tuple[str, str], run: Callable[[T], Result]) -> Callable[[T], bool]:
    """Whether a candidate still fails the way ``found`` did."""
    return lambda candidate: signature(run(candidate)) == found


def _sized(frame: bytes) -> str:
    return (len(frame).to_bytes(4, "big") + frame).hex()


def triage(report: Report) -> None:
    """Each finding's candidate frames replayed alone in the guarded worker (decode, then a one-step session):
    the first that fails there is the reproducer, minimized."""

    def alone(frame: bytes) -> Result:
        return guard.session([(frame, 0)])

    with Guard() as guard:
        for finding in report.findings[:20]:
            candidates = [bytes.fromhex(text)[4:] for text in reversed(finding.frames)]
            for frame, run in ((frame, run) for frame in candidates for run in (guard.decode, alone)):
                found = signature(run(frame))
                if found is not None:
                    small = minimize(frame, _same(found, run))
                    print(f"REPRODUCER of {finding.kind} ({finding.detail[:120]}): {found[0]} at {found[1]}")
                    print(f"    {_sized(small)}")
                    break


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.guarded:
        return guarded(args.guarded, args.seed)
    options = Options(
        frames=args.frames,
        seed=args.seed,
        connections=args.connections,
        mutate=args.mutate,
        memory_mb=args.memory_mb,
        rounds=args.rounds,
        log_dir=args.log_dir,
    )
    report = run(options)
    print_report(report, options)
    if report.findings:
        triage(report)
    if args.json:
        args.json.write_text(json.dumps(report.as_dict(), indent=2))
    return 1 if report.deaths or report.internal_errors or report.good_failures else 0


if __name__ == "__main__":
    sys.exit(main())
