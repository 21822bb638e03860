"""A log with the transaction coordinator's events (docs/events.md, "Transactions") reads as parsed lines and leaves
the groups' tables as they were: the records are written by the broker's own emitter (a real hub and event file,
on a manual clock), next to a classic group's history."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from broker.analytics import job
from broker.events import names
from broker.events.hub import EventFile, EventHub
from broker.transactions.config import TxnConfig
from broker.transactions.events import TxnEventLog
from tests.analytics.conftest import rows, write_lines
from tests.analytics.test_windows import eager_log, pick
from tests.transactions.harness import T0, T1, TIMEOUT_MS, E, Harness


def transaction_log(path: Path) -> list[str]:
    """Commit, client abort, fence and timeout, as the broker writes them; the log's lines."""
    h = Harness(TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000))
    hub = EventHub(h.clock, file=EventFile(str(path)))
    h.tc.events = TxnEventLog(hub, h.clock)
    pid, epoch = h.ongoing(T0, T1)
    assert h.add_offsets(pid, epoch, "eager") is E.none
    assert h.end(pid, epoch).error is E.none
    assert h.add(pid, epoch, T0).error is E.none
    assert h.end(pid, epoch, commit=False).error is E.none
    h.ongoing(T1, tid="fenced")
    h.init("fenced")
    h.ongoing(T0, tid="slow")
    h.advance(TIMEOUT_MS + 1_000)
    hub.close()
    return path.read_text().splitlines()


def test_transaction_events_are_parsed_and_change_no_table(spark: SparkSession, tmp_path: Path) -> None:
    txn_lines = transaction_log(tmp_path / "txn.jsonl")
    seen = [json.loads(line)["event"] for line in txn_lines]
    assert set(seen) == names.TRANSACTION_EVENTS
    group_lines = eager_log("run-a", "eager").lines()
    groups = write_lines(tmp_path / "groups.jsonl", group_lines)
    out = tmp_path / "out"
    job.run([str(groups), str(tmp_path / "txn.jsonl")], str(out), spark=spark)

    counts = {row["kind"]: row["count"] for row in rows(spark, out, "input")}
    assert counts["parsed"] == counts["lines"] == len(group_lines) + len(txn_lines)
    rebalances = sorted(rows(spark, out, "rebalances"), key=lambda r: r["start_ms"])
    found = [pick(r, "group_id", "start_ms", "end_ms", "outcome") for r in rebalances]
    assert found == [("eager", 1000, 2100, "stable"), ("eager", 10000, 10600, "stable")]
    assert {m["group_id"] for m in rows(spark, out, "members")} == {"eager"}
    assert {r["group_id"] for r in rows(spark, out, "ownership")} == {"eager"}
    assert {s["group_id"] for s in rows(spark, out, "summary")} == {"eager", None}
