"""The analytics job's scale benchmark: synthetic event logs of 1M and 10M events through Spark, events per second.

``python -m benchmarks.analytics`` generates each size with ``broker.analytics.generate`` into a temporary
directory, runs the job (``broker.analytics.job.run``) on it in local mode, prints what it measured and deletes
the logs and tables. It is a measurement, not a test: nothing is asserted. ``--readme`` also writes the figures
into the "Analytics (Spark)" section of ``benchmarks/README.md`` (replacing that section only).

Events per second is the parsed events over the job's wall time, from starting Spark to the last table written
(the generator's time is reported apart). Spark runs as ``local[N]`` with the UI off, in this process's JVM.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

README = Path(__file__).with_name("README.md")
SECTION = "## Analytics (Spark)"
DEFAULT_SIZES = (1_000_000, 10_000_000)


@dataclass
class Measurement:
    events: int
    files: int
    input_mb: float
    generate_s: float
    generate_events_per_s: float
    job_s: float
    events_per_s: float
    rows: dict[str, int]
    report_s: float | None = None


def measure(
    size: int,
    files: int,
    master: str,
    work: Path,
    conf: dict[str, str],
    seed: int = 1,
    jobs: int = 1,
    report: bool = False,
    share_per_million: int = 0,
) -> Measurement:
    """Generate ``size`` events, run the job on them, and delete both afterwards. ``share_per_million``: share
    groups per million events (issue 28: their deliveries are most of their events; 0: the logs before them)."""
    from broker.analytics import generate, job, progress

    logs = work / f"events-{size}"
    out = work / f"tables-{size}"
    try:
        target = logs if files > 1 else logs / "events.jsonl"
        share_groups = max(files, size * share_per_million // 1_000_000) if share_per_million else 0
        generated = generate.generate(
            target, size, seed=seed, files=files, restarts=2, jobs=jobs, share_groups=share_groups
        )
        print(
            f"[{size:,}] generated {generated.events:,} events, {generated.bytes / 1e6:,.0f} MB in {files} file(s): "
            f"{generated.seconds:.1f} s ({generated.events_per_second:,.0f} events/s)",
            file=sys.stderr,
            flush=True,
        )
        inputs = [str(p) for p in generated.paths]
        started = time.monotonic()
        result = job.run(inputs, str(out), master=master, conf=conf, progress=progress.stderr_progress())
        seconds = time.monotonic() - started
        report_s = None
        if report:  # the HTML report over the same tables, in the same session (bins and top-N only)
            from broker.analytics import report as html_report

            rendering = time.monotonic()
            page = html_report.render(out)
            report_s = round(time.monotonic() - rendering, 1)
            print(f"[{size:,}] report {page} in {report_s:.1f} s", file=sys.stderr, flush=True)
        parsed = next((int(r["count"]) for r in result.input if r["kind"] == "parsed"), generated.events)
        return Measurement(
            events=parsed,
            files=files,
            input_mb=round(generated.bytes / 1e6, 1),
            generate_s=round(generated.seconds, 1),
            generate_events_per_s=round(generated.events_per_second),
            job_s=round(seconds, 1),
            events_per_s=round(parsed / seconds),
            rows=dict(result.rows),
            report_s=report_s,
        )
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def _stop_spark() -> None:
    """A fresh SparkContext for each size, so nothing cached by the last size is left to help the next."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def markdown(results: Sequence[Measurement], command: str, master: str, driver_memory: str) -> str:
    cpu = _cpu_model()
    reported = any(r.report_s is not None for r in results)
    lines = [
        SECTION,
        "",
        "`group-broker analyze` (the Spark job, `broker/analytics/job.py`) over synthetic event logs from",
        "`broker/analytics/generate.py` (realistic version-2 logs: many groups, eager, cooperative and",
        "consumer-protocol rebalances, expiries, static members, restarts of the broker). Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        textwrap.fill(
            f"Spark {_spark_version()} in local mode (`{master}`, UI off, `spark.driver.memory` {driver_memory}), "
            f"Python {platform.python_version()}, {os.cpu_count()} cores ({cpu}). Events/s is parsed events over "
            "the job's wall time, Spark's start-up included. The log is written first (by as many processes as "
            "cores; its time is listed apart) and deleted after. The machine is shared with other work, so the "
            "figures move by tens of percent from run to run.",
            width=110,
        ),
        "",
        "| events | files | input | generate | job | events/s | rebalances | members | ownership rows |"
        + (" report |" if reported else ""),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if reported else ""),
    ]
    for r in results:
        report = f" {r.report_s:,.0f} s |" if r.report_s is not None else (" - |" if reported else "")
        lines.append(
            f"| {r.events:,} | {r.files} | {r.input_mb:,.0f} MB | {r.generate_s:,.0f} s "
            f"({r.generate_events_per_s:,.0f}/s) | {r.job_s:,.0f} s | **{r.events_per_s:,.0f}** | "
            f"{r.rows.get('rebalances', 0):,} | {r.rows.get('members', 0):,} | {r.rows.get('ownership', 0):,} |{report}"
        )
    return "\n".join(lines) + "\n"


def write_readme(section: str, readme: Path = README) -> None:
    """Replace the "Analytics (Spark)" section of the README (or append it); every other section stays as it is."""
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    start = text.find(SECTION + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(SECTION))
        end = len(text) if following < 0 else following + 1
        text = text[:start] + section + ("\n" + text[end:] if following >= 0 else "")
    readme.write_text(text, encoding="utf-8")


def _spark_version() -> str:
    try:
        import pyspark

        return str(pyspark.__version__)
    except ImportError:
        return "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.analytics", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated event counts (default 1000000,10000000)",
    )
    parser.add_argument("--files", type=int, default=4, help="split each log into this many files (default 4)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--generate-jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes writing the log files (default: cores)",
    )
    parser.add_argument(
        "--driver-memory", default="8g", help="spark.driver.memory (default 8g: 4g runs out at 10M events)"
    )
    parser.add_argument("--tmp", default=None, help="where the logs and tables go (default: the system's temp dir)")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--report", action="store_true", help="also time rendering the HTML report of each size")
    parser.add_argument("--readme", action="store_true", help="write the figures into benchmarks/README.md")
    parser.add_argument(
        "--share-groups-per-million", type=int, default=8, metavar="N",
        help="KIP-932 share groups per million events (default 8: about a fifth of the events; 0: none)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    conf = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
    command = "python -m benchmarks.analytics " + " ".join(argv if argv is not None else sys.argv[1:])
    results = []
    with tempfile.TemporaryDirectory(prefix="analytics-bench-", dir=args.tmp) as work:
        for size in sizes:
            results.append(
                measure(
                    size, args.files, args.master, Path(work), conf, jobs=args.generate_jobs, report=args.report,
                    share_per_million=args.share_groups_per_million,
                )
            )
            _stop_spark()
            r = results[-1]
            print(f"[{size:,}] job {r.job_s:,.1f} s: {r.events_per_s:,.0f} events/s", file=sys.stderr, flush=True)
    section = markdown(results, command.strip(), args.master, args.driver_memory)
    print(section)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")
    if args.readme:
        write_readme(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
