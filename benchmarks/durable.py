"""``python -m benchmarks.durable``: the broker with ``--data-dir`` beside the broker without, in one run (issue 27).

Rows, each ours-with-a-data-directory against ours-in-memory, and the bars the issue sets:

* heartbeats (the classic scenario of ``python -m benchmarks``: 100 members, 8 connections x 64): >= 0.95x, since a
  steady heartbeat writes nothing;
* OffsetCommit and Produce (acks=all, 1 KB records) throughput with ``--fsync never``: >= 0.5x. A confluent-kafka
  client in its own process: a Producer for ``--seconds``, and synchronous commits of one consumer;
* start-up to the first answered ApiVersions with an empty data directory: <= 1.2x;
* the recovery of a directory holding 1,000,000 records and 10,000 groups' offsets: start-up to /readyz, beside the
  time to read the same bytes (every file of the directory read whole). The directory is built once (records
  through a broker, the offsets through the journal itself) and cached in ``--cache`` between runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import scenarios
from benchmarks.loadgen import FormOptions
from benchmarks.scenarios import HeartbeatLoad
from benchmarks.systems import REPO, Ours, api_versions, free_port

CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from confluent_kafka import Consumer, Producer, TopicPartition
    mode, bootstrap, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    done = 0
    if mode == "produce":
        acked = [0]
        def report(error, message):
            if error is None:
                acked[0] += 1
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
        value = b"x" * 1024
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            try:
                p.produce("bench", value, callback=report)
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(30)
        done = acked[0]
    else:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commit", "enable.auto.commit": False})
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            c.commit(offsets=[TopicPartition("bench", 0, done + 1)], asynchronous=False)
            done += 1
        c.close()
    print(json.dumps({"count": done, "seconds": time.perf_counter() - started}))
    """
)


def _client(mode: str, bootstrap: str, seconds: float) -> float:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, mode, bootstrap, str(seconds)], capture_output=True, text=True, timeout=300,
        cwd=REPO,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["count"]) / float(result["seconds"])


def _readyz(port: int, timeout: float = 600) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("not ready")


def _serve(data_dir: Path | None, *extra: str) -> tuple[subprocess.Popen[str], int, int]:
    port, admin = free_port(), free_port()
    argv = [sys.executable, "-m", "broker", "serve", "--port", str(port), "--admin-port", str(admin),
            "--log-level", "warning", *extra]  # fmt: skip
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    return process, port, admin


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def heartbeats(data_dir: Path | None, sizes: Sizes) -> float:
    extra = ["--data-dir", str(data_dir)] if data_dir is not None else []
    with Ours.start(None, extra) as ours:
        ours.wait_ready()
        versions, _ = scenarios.probe_versions(ours, api_versions(ours.host, ours.port))
        load = HeartbeatLoad(sizes.connections, 64, 8, sizes.seconds, 1, 100)
        measured = scenarios.heartbeat_scenario(ours, sizes.groups, sizes.members, FormOptions(versions), load, 0)
        return float(measured.value or 0)


def throughput(mode: str, data_dir: Path | None, seconds: float) -> float:
    process, port, admin = _serve(data_dir, "--topic", "bench:1")
    try:
        _readyz(admin)
        return _client(mode, f"127.0.0.1:{port}", seconds)
    finally:
        _stop(process)


def startup(data_dir: Path | None, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        directory = None
        if data_dir is not None:
            directory = Path(tempfile.mkdtemp(dir=data_dir))
        started = time.perf_counter()
        process, port, _ = _serve(directory)
        while True:
            try:
                api_versions("127.0.0.1", port, timeout=1)
                break
            except OSError:
                time.sleep(0.002)
        samples.append((time.perf_counter() - started) * 1000)
        _stop(process)
    return statistics.median(samples)


def build_recovery_dir(path: Path, records: int, groups: int) -> None:
    """``records`` 100-byte records through a broker (acks=all), then ``groups`` groups' offsets through the journal."""
    if (path / "built.json").exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    process, port, admin = _serve(path, "--topic", "recovery:6")
    try:
        _readyz(admin)
        code = textwrap.dedent(f"""
            from confluent_kafka import Producer
            p = Producer({{"bootstrap.servers": "127.0.0.1:{port}", "acks": "all", "linger.ms": 20,
                          "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000}})
            for i in range({records}):
                while True:
                    try:
                        p.produce("recovery", b"r" * 100)
                        break
                    except BufferError:
                        p.poll(0.05)
            assert p.flush(120) == 0
        """)
        subprocess.run([sys.executable, "-c", code], check=True, timeout=900)
    finally:
        _stop(process)
    from broker.storage.disk.datadir import DataDir
    from broker.storage.disk.fsync import FsyncPolicy

    directory = DataDir.open(path, cluster_id="", cluster_id_given=False, fsync=FsyncPolicy())
    for group in range(groups):
        with directory.journal.atomic():
            for partition in range(6):
                directory.journal.put(
                    "offsets.commit", (f"group-{group}", "recovery", partition),
                    {"offset": 1000, "leader_epoch": 0, "metadata": "", "commit_ms": 0, "expire_ms": None,
                     "order": group * 6 + partition + 1},
                )  # fmt: skip
    directory.close()
    (path / "built.json").write_text(json.dumps({"records": records, "groups": groups}))


def recovery(path: Path, repeats: int) -> tuple[float, float, int]:
    """Median start-up to /readyz on the directory, the median time to read its bytes, and how many bytes."""
    loads, reads = [], []
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    for _ in range(repeats):
        started = time.perf_counter()
        for file in sorted(path.rglob("*")):
            if file.is_file():
                file.read_bytes()
        reads.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        process, _, admin = _serve(path)
        _readyz(admin)
        loads.append((time.perf_counter() - started) * 1000)
        _stop(process)
    return statistics.median(loads), statistics.median(reads), size


@dataclass(frozen=True)
class Sizes:
    """How much each figure measures: the heartbeat load of ``python -m benchmarks`` (100 members, 8 connections)
    and the recovery directory's size, unless told otherwise (``--quick``)."""

    seconds: float = 5.0
    startup_repeats: int = 7
    groups: int = 10
    members: int = 10
    connections: int = 8
    heartbeat_runs: int = 2
    records: int = 1_000_000
    recovery_groups: int = 10_000
    cache: Path = Path(tempfile.gettempdir()) / "group-broker-recovery-bench"
    recovery: bool = True


@dataclass(frozen=True)
class Figure:
    name: str
    memory: float
    durable: float
    bar: str
    ok: bool

    @property
    def ratio(self) -> float:
        return self.durable / self.memory if self.memory else float("nan")


@dataclass
class Measured:
    figures: list[Figure] = field(default_factory=list)
    #: (start-up to /readyz ms, reading the same bytes ms, bytes), when measured.
    recovery: tuple[float, float, int] | None = None
    sizes: Sizes = field(default_factory=Sizes)

    def table(self) -> str:
        lines = ["| figure | memory only | --data-dir (fsync never) | ratio | bar |", "|---|---:|---:|---:|---|"]
        for f in self.figures:
            verdict = "PASS" if f.ok else "FAIL"
            lines.append(f"| {f.name} | {f.memory:,.1f} | {f.durable:,.1f} | {f.ratio:.2f}x | {f.bar} {verdict} |")
        if self.recovery is not None:
            load_ms, read_ms, size = self.recovery
            lines += [
                "",
                f"recovery of {self.sizes.records:,} records and {self.sizes.recovery_groups:,} groups' offsets "
                f"({size / 1e6:,.0f} MB): start-up to /readyz {load_ms:,.0f} ms; reading the same bytes "
                f"{read_ms:,.0f} ms ({load_ms / read_ms if read_ms else float('nan'):.1f}x)",
            ]
        return "\n".join(lines)

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "figures": [{**asdict(f), "ratio": f.ratio} for f in self.figures],
            "sizes": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.sizes).items()},
        }
        if self.recovery is not None:
            load_ms, read_ms, size = self.recovery
            document["recovery"] = {"load_ms": load_ms, "read_ms": read_ms, "bytes": size}
        return document


def measure(sizes: Sizes) -> Measured:
    """Every figure, memory-only beside ``--data-dir``, each pair in this one run."""
    work = Path(tempfile.mkdtemp(prefix="durable-bench-"))
    measured = Measured(sizes=sizes)

    def figure(name: str, memory: float, durable: float, bar: str, ok: bool) -> None:
        measured.figures.append(Figure(name, memory, durable, bar, ok))
        print(f"  durable: {name}: memory {memory:,.1f}, data dir {durable:,.1f}", file=sys.stderr, flush=True)

    try:
        # Best of two, interleaved: one 5 s run moves by 5-10% between two broker processes on this VM, as much as
        # the bar's margin (0.92x, 1.05x and 1.01x in three runs of the same tree, 2026-12-03).
        pairs = [(heartbeats(None, sizes), heartbeats(work / f"hb{i}", sizes)) for i in range(sizes.heartbeat_runs)]
        memory, durable = max(m for m, _ in pairs), max(d for _, d in pairs)
        figure("heartbeats/s", memory, durable, ">= 0.95x", durable >= 0.95 * memory)
        for mode in ("commit", "produce"):
            memory = throughput(mode, None, sizes.seconds)
            durable = throughput(mode, work / mode, sizes.seconds)
            name = "OffsetCommit/s (sync, one consumer)" if mode == "commit" else "Produce 1 KB records/s (acks=all)"
            figure(name, memory, durable, ">= 0.5x", durable >= 0.5 * memory)
        (work / "startup").mkdir()
        memory, durable = startup(None, sizes.startup_repeats), startup(work / "startup", sizes.startup_repeats)
        figure("start-up to first answer, ms", memory, durable, "<= 1.2x", durable <= 1.2 * memory)
        if sizes.recovery:
            cache = sizes.cache / f"{sizes.records}-records-{sizes.recovery_groups}-groups"
            build_recovery_dir(cache, sizes.records, sizes.recovery_groups)
            measured.recovery = recovery(cache, 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return measured


def main(argv: Sequence[str] | None = None) -> int:
    defaults = Sizes()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.durable", description=__doc__)
    parser.add_argument("--seconds", type=float, default=defaults.seconds, help="each throughput and heartbeat run")
    parser.add_argument("--startup-repeats", type=int, default=defaults.startup_repeats)
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--groups", type=int, default=defaults.recovery_groups)
    parser.add_argument("--cache", type=Path, default=defaults.cache)
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = Sizes(
        seconds=args.seconds, startup_repeats=args.startup_repeats, records=args.records,
        recovery_groups=args.groups, cache=args.cache, recovery=not args.skip_recovery,
    )  # fmt: skip
    measured = measure(sizes)
    print(f"\n{time.strftime('%Y-%m-%d')}  python -m benchmarks.durable {' '.join(argv or sys.argv[1:])}")
    print(measured.table())
    if args.json is not None:
        args.json.write_text(json.dumps(measured.document(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
