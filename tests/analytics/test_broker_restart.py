"""Broker restarts in the analytics job (issue 27): a real broker with ``--data-dir`` SIGKILLed and started again
under a live kafka-python group, then the job and the report on its event log; and handwritten logs that pin
what the job makes of a clean stop, a kill, a memory-only start and a torn ``broker_started``.

docs/analytics.md, "Broker restarts": one disturbance row per restart (``group_id`` "") and one per group that had
members when the broker stopped, with the rebalance the restart caused there; the intervals open at the stop end
``unloaded`` with ``end_cause`` ``broker_stopped`` or ``broker_killed``; the summary counts the restarts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job, report
from broker.analytics.report import plots
from broker.analytics.report.gather import gather
from broker.analytics.tables.disturbances import DEFAULT_SESSION_MS, MARGIN_MS
from broker.events import names
from tests.analytics.conftest import Log, rows, write_lines
from tests.analytics.test_windows import join_done, joined, started, synced
from tests.conftest import ROOT
from tests.durability.broker_process import BrokerProcess

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SESSION_MS = 6000  # the broker's group.min.session.timeout.ms
GROUP = "restart-g"
TOPIC = "restart-t"

#: A member in its own process, killed with the broker: after the restart its session runs out (the rebalance the
#: restart caused), while the in-process member goes on.
DOOMED = f"""
import sys
from kafka import KafkaConsumer
consumer = KafkaConsumer({TOPIC!r}, bootstrap_servers=sys.argv[1], group_id={GROUP!r}, client_id="doomed",
                         auto_offset_reset="earliest", session_timeout_ms={SESSION_MS}, heartbeat_interval_ms=500)
while True:
    consumer.poll(200)
"""


def _group(broker: BrokerProcess) -> dict[str, Any]:
    try:
        answer: dict[str, Any] = broker.get(f"/v1/groups/{GROUP}")
    except OSError:
        return {}
    return answer


def _poll_until(consumer: Any, broker: BrokerProcess, done: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        consumer.poll(200)
        group = _group(broker)
        if group and done(group):
            return group
    raise AssertionError(f"group not as expected in {timeout_s}s: {_group(broker)}")


@pytest.fixture(scope="module")
def real(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from kafka import KafkaConsumer, KafkaProducer

    work = tmp_path_factory.mktemp("broker-restart")
    events = work / "events.jsonl"
    broker = BrokerProcess(work / "data", "--topic", f"{TOPIC}:4", "--event-log", str(events))
    broker.start()
    doomed: subprocess.Popen[bytes] | None = None
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(40):
            producer.send(TOPIC, b"record-%d" % i)
        producer.flush()
        producer.close()
        survivor = KafkaConsumer(
            TOPIC, bootstrap_servers=broker.bootstrap, group_id=GROUP, client_id="survivor",
            auto_offset_reset="earliest", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
        )  # fmt: skip
        doomed = subprocess.Popen([sys.executable, "-c", DOOMED, broker.bootstrap], cwd=ROOT)
        before = _poll_until(
            survivor, broker, lambda g: g["state"] == "Stable" and len(g["members"]) == 2, timeout_s=60
        )
        survivor.commit()
        broker.kill()
        doomed.kill()
        doomed.wait(10)
        broker.start()
        # The survivor goes on with its generation; the doomed member's session runs out: a rebalance.
        after = _poll_until(
            survivor,
            broker,
            lambda g: (
                g["state"] == "Stable" and len(g["members"]) == 1 and g["generation_id"] > before["generation_id"]
            ),
            timeout_s=60,
        )
        survivor.close()
    finally:
        if doomed is not None and doomed.poll() is None:
            doomed.kill()
        broker.stop()  # a clean stop: the second run ends with broker_stopped {clean: true}
    out = work / "tables"
    result = job.run([str(events)], str(out), spark=spark)
    page = report.render(out, spark)
    return {
        "log": [json.loads(line) for line in events.read_text().splitlines()],
        "before": before,
        "after": after,
        "result": result,
        "out": out,
        "disturbances": rows(spark, out, "disturbances"),
        "members": rows(spark, out, "members"),
        "ownership": rows(spark, out, "ownership"),
        "rebalances": rows(spark, out, "rebalances"),
        "summary": rows(spark, out, "summary"),
        "html": page.read_text(encoding="utf-8"),
    }


@pytest.mark.timeout(300)
def test_a_real_restart_is_a_disturbance_with_the_rebalance_it_caused(real: dict[str, Any]) -> None:
    log = real["log"]
    runs = list(dict.fromkeys(e["run_id"] for e in log))
    assert len(runs) == 2, runs
    first, second = runs
    stopped = [(e["run_id"], e["seq"], e["clean"]) for e in log if e["event"] == names.BROKER_STOPPED]
    assert stopped[0] == (second, 1, False) and [s[::2] for s in stopped[1:]] == [(second, True)], stopped
    counts = {entry["kind"]: entry["count"] for entry in real["result"].input}
    assert counts["lines"] == counts["parsed"] == len(log), counts  # the broker's records all read, none dropped

    restart = [d for d in real["disturbances"] if d["action"] == "broker_restart"]
    (own,) = [d for d in restart if d["group_id"] == ""]
    (group,) = [d for d in restart if d["group_id"] == GROUP]
    started_at = next(e for e in log if e["run_id"] == second and e["event"] == names.BROKER_STARTED)
    assert own == own | {
        "run_id": second, "seq": started_at["seq"], "ts_ms": started_at["ts_ms"], "event": "broker_started",
        "clean": False, "loaded_groups": 1, "loaded_offsets": started_at["loaded"]["offsets"],
        "loaded_records": 40, "load_ms": pytest.approx(started_at["load_ms"]), "previous_run_id": first,
        "label": "broker restart (killed)", "data_dir": started_at["data_dir"],
    }, own  # fmt: skip
    assert own["detail"].startswith("broker restart after a kill: loaded 1 group, "), own
    # In the group: the doomed member's expiry, the first rebalance of the second run.
    (doomed,) = [m for m in real["members"] if m["run_id"] == second and m["client_id"] == "doomed"]
    assert (doomed["end"], doomed["end_cause"], doomed["joined_ms"]) == ("expired", "session_timeout", None)
    caused = min((r for r in real["rebalances"] if r["run_id"] == second), key=lambda r: r["start_ms"])
    assert group == group | {
        "run_id": second, "window_ms": SESSION_MS + MARGIN_MS, "rebalance_generation": caused["generation"],
        "rebalance_cause": caused["cause"], "rebalance_start_ms": caused["start_ms"],
        "detected_ms": caused["start_ms"] - started_at["ts_ms"],
    }, (group, caused)  # fmt: skip
    assert caused["generation"] == real["after"]["generation_id"] and caused["outcome"] == "stable", caused
    assert 0 <= group["detected_ms"] <= SESSION_MS + MARGIN_MS, group


@pytest.mark.timeout(300)
def test_the_first_runs_intervals_end_at_the_kill(real: dict[str, Any]) -> None:
    log = real["log"]
    first = log[0]["run_id"]
    killed_at = next(e["ts_ms"] for e in log if e["event"] == names.BROKER_STOPPED and not e["clean"])
    mine = [m for m in real["members"] if m["run_id"] == first]
    assert len(mine) == 2 and all(
        (m["end"], m["end_cause"], m["ended_ms"]) == ("unloaded", "broker_killed", killed_at) for m in mine
    ), mine
    owned = [o for o in real["ownership"] if o["run_id"] == first and o["end_ms"] == killed_at]
    assert owned and all(o["end"] == "unloaded" for o in owned), real["ownership"]
    assert all(o["end"] != "open" for o in real["ownership"]) and all(m["end"] != "open" for m in real["members"])
    (overall,) = [s for s in real["summary"] if s["scope"] == "all"]
    (group,) = [s for s in real["summary"] if s["group_id"] == GROUP]
    assert overall["broker_restarts"] == 1 and group["broker_restarts"] == 1
    assert real["result"].overall["broker_restarts"] == 1


@pytest.mark.timeout(300)
def test_the_report_shows_the_real_restart(real: dict[str, Any], spark: SparkSession) -> None:
    page = real["html"]
    assert '<section id="disturbances">' in page
    assert "broker_restart (killed)" in page and "broker restart after a kill: loaded 1 group, " in page
    (group,) = [d for d in real["disturbances"] if d["action"] == "broker_restart" and d["group_id"] == GROUP]
    assert f"broker restart after a kill -&gt; rebalance gen {group['rebalance_generation']}, detected in " in page
    data = gather(spark, real["out"])
    figure = plots._plot_timeline(data)
    lanes = dict(zip(data.timeline_groups, figure.axes, strict=True))
    marks = [line for line in lanes[GROUP].lines if line.get_gid() == "disturbance"]
    assert [cast(Any, line.get_xdata())[0] * 86_400_000 for line in marks] == [pytest.approx(group["ts_ms"], abs=1)]
    assert "broker restart (killed)" in [text.get_text() for text in lanes[GROUP].texts]


# -- handwritten logs: a clean stop and a kill on one data directory, a memory-only broker, torn records


def _start(log: Log, ts: int, data_dir: str | None, clean: bool, groups: int, **loaded: int) -> None:
    counts = {"topics": 1 if groups else 0, "groups": groups, "offsets": 0, "transactions": 0, "records": 0, **loaded}
    log(ts, names.BROKER_STARTED, v=2, group_id="", data_dir=data_dir, clean_shutdown=clean,
        loaded=counts if data_dir else {}, load_ms=1.5)  # fmt: skip


def handwritten() -> list[Log]:
    """Run A: a group of a and b, stopped cleanly (the group unloaded). Run B on the same directory: the group
    loaded, b rejoins (the rebalance the restart caused); then killed. Run C: the kill found; a leaves (not the
    restart's doing). Run M: a memory-only broker, no restart."""
    a = Log("run-a", "h")
    _start(a, 1000, "/d", True, 0)
    a(1100, "group_created")
    joined(a, 1100, "a", session_ms=4000)
    joined(a, 1100, "b", session_ms=4000)
    started(a, 1100, 0, "Empty", 2, "member_joined", "a")
    join_done(a, 1200, 1, ["a", "b"])
    synced(a, 1300, 1, {"a": [0], "b": [1]})
    a(9000, names.BROKER_STOPPED, v=2, group_id="", clean=True)
    a(9001, "state_changed", **{"from": "Stable", "to": "Dead", "generation_id": 1})

    b = Log("run-b", "h")
    _start(b, 20000, "/d", True, 1, offsets=2, records=10)
    b(21000, "member_rejoined", member_id="b", protocols=["range"], state="Stable", reason=None)
    started(b, 21000, 1, "Stable", 2, "member_rejoined", "b")
    join_done(b, 21100, 2, ["a", "b"])
    synced(b, 21200, 2, {"a": [0], "b": [1]})

    c = Log("run-c", "h")
    c(40000, names.BROKER_STOPPED, v=2, group_id="", clean=False, detected_at_start=True)
    _start(c, 40000, "/d", False, 1, offsets=2, records=10)
    c(41000, "member_left", member_id="a", group_instance_id=None, client_id="client-a", cause="leave_group",
      reason=None)  # fmt: skip
    started(c, 41000, 2, "Stable", 1, "member_left", "a")
    join_done(c, 41100, 3, ["b"])
    synced(c, 41200, 3, {"b": [0, 1]})

    m = Log("run-m", "m")
    _start(m, 50000, None, True, 0)
    m(50100, "group_created")
    joined(m, 50100, "x")
    started(m, 50100, 0, "Empty", 1, "member_joined", "x")

    torn = Log("run-t", "")
    torn(60000, names.BROKER_STARTED, v=2, data_dir="/t", clean_shutdown=True, loaded={"groups": "many"}, load_ms=1)
    torn(60001, names.BROKER_STARTED, v=1, data_dir="/t", clean_shutdown=True, loaded={}, load_ms=1)
    return [a, b, c, m, torn]


@pytest.fixture(scope="module")
def hand(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("broker-restart-hand")
    lines = [line for log in handwritten() for line in log.lines()]
    out = work / "tables"
    result = job.run([str(write_lines(work / "hand.jsonl", lines))], str(out), spark=spark)
    return {
        "result": result,
        "input": {entry["kind"]: entry["count"] for entry in result.input},
        "disturbances": rows(spark, out, "disturbances"),
        "members": rows(spark, out, "members"),
        "ownership": rows(spark, out, "ownership"),
        "summary": rows(spark, out, "summary"),
    }


def test_broker_records_are_read_and_a_torn_one_is_counted(hand: dict[str, Any]) -> None:
    found = hand["input"]
    # loaded.groups as a string: malformed; a version-1 broker_started: not that format's event.
    assert (found["malformed"], found["unknown_event"], found["missing_field"]) == (1, 1, 0), found
    assert found["parsed"] == found["lines"] - 2


def test_each_restart_is_a_row_with_the_rebalance_it_caused(hand: dict[str, Any]) -> None:
    got = sorted(
        (d["run_id"], d["group_id"], d["clean"], d["previous_run_id"], d["loaded_groups"], d["window_ms"],
         d["rebalance_generation"], d["rebalance_cause"], d["detected_ms"])
        for d in hand["disturbances"]
    )  # fmt: skip
    assert got == [
        ("run-b", "", True, "run-a", 1, None, None, None, None),
        ("run-b", "h", True, "run-a", 1, 4000 + MARGIN_MS, 2, "member_rejoined", 1000),
        ("run-c", "", False, "run-b", 1, None, None, None, None),
        # a's leave starts the only rebalance: a client's own act, not the restart's
        # (the window: the group's session timeout of an earlier run: its members were silent in run B)
        ("run-c", "h", False, "run-b", 1, 4000 + MARGIN_MS, None, None, None),
    ], got
    assert DEFAULT_SESSION_MS != 4000  # the window is the group's own session timeout
    (clean,) = [d for d in hand["disturbances"] if d["run_id"] == "run-b" and d["group_id"] == ""]
    assert (
        clean["detail"] == "broker restart after a clean stop: loaded 1 group, 2 offsets, 10 records in 1.5 ms from /d"
    )
    assert clean["label"] == "broker restart (clean)" and clean["ts_ms"] == 20000 and clean["seq"] == 1


def test_intervals_open_at_a_stop_end_there(hand: dict[str, Any]) -> None:
    members = sorted(
        (m["run_id"], m["member_id"], m["ended_ms"], m["end"], m["end_cause"])
        for m in hand["members"]
        if m["group_id"] == "h"
    )
    assert members == [
        ("run-a", "a", 9001, "unloaded", "broker_stopped"),  # the clean stop's unloading says why
        ("run-a", "b", 9001, "unloaded", "broker_stopped"),
        ("run-c", "a", 41000, "left", "leave_group"),  # loaded silently: its end without a start
    ], members
    ownership = sorted((o["run_id"], o["member_id"], o["partition"], o["end_ms"], o["end"]) for o in hand["ownership"])
    assert ownership == [
        ("run-a", "a", 0, 9001, "unloaded"),
        ("run-a", "b", 1, 9001, "unloaded"),
        ("run-b", "a", 0, 40000, "unloaded"),  # open when the broker was killed: ended when the kill was found
        ("run-b", "b", 1, 40000, "unloaded"),
        ("run-c", "b", 0, None, "open"),  # the log ends: no stop
        ("run-c", "b", 1, None, "open"),
    ], ownership
    # A memory-only broker continues nothing and nothing stopped it: its member is open, no restart.
    (x,) = [m for m in hand["members"] if m["group_id"] == "m"]
    assert (x["end"], x["end_cause"]) == ("open", None)
    summary = {s["group_id"]: s["broker_restarts"] for s in hand["summary"]}
    assert summary == {None: 2, "h": 2, "m": 0}, summary
