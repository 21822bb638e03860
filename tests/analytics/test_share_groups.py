"""Share groups (issue 28): the job's share tables over the event log of a real ShareConsumer run.

``share_log.run_scenario`` runs the real broker and four confluent-kafka ``ShareConsumer`` processes one after the
other on a one-partition topic: RELEASEs until the delivery limit archives a record, a REJECT, a close() that
releases a poll's records (``session_closed``), a SIGSTOPped holder whose lock expires (``lock_expired``), and a
member that accepts them in the end. What the workers printed (every record they were given, with its delivery
count) is the ground truth of the deliveries; the log's own timestamps are that of the times in flight. The job
runs once (module fixture) and is read by both tests: the tables, then the report's section.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import job
from broker.analytics.report import render
from tests.analytics.conftest import rows
from tests.analytics.share_log import Scenario, run_scenario
from tests.clients.share_processes import DELIVERY_LIMIT, LOCK_MS

#: The purgatory fires a lock's deadline within a tick of it; generous for a loaded machine.
LOCK_SLACK_MS = 500


@dataclass
class Analysed:
    scenario: Scenario
    out: Path
    result: job.Result
    logged: list[dict[str, Any]]
    deliveries: list[dict[str, Any]]
    in_flight: list[dict[str, Any]]


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    tmp = tmp_path_factory.mktemp("share")
    scenario = run_scenario(tmp)
    out = tmp / "analysis"
    result = job.run([str(scenario.log)], str(out), spark=spark)
    logged = [json.loads(line) for line in scenario.log.read_text().splitlines()]
    share = [r for r in rows(spark, out, "share_deliveries") if r["group_id"] == scenario.group]
    flight = [r for r in rows(spark, out, "share_in_flight") if r["group_id"] == scenario.group]
    return Analysed(scenario, out, result, logged, share, flight)


def percentile(values: list[int], q: float) -> float:
    """Spark's ``percentile``: linear interpolation between the two nearest ranks."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 3)


def acknowledged_in_flight(logged: list[dict[str, Any]]) -> list[int]:
    """From the log, for this scenario: an acknowledgement ends its count of records of its member's last
    acquisition (every member here acknowledges one poll at a time, and a poll is one acquisition)."""
    acquired_ms: dict[str, int] = {}
    times: list[int] = []
    for record in logged:
        if record["event"] == "records_acquired":
            acquired_ms[record["member_id"]] = record["ts_ms"]
        elif record["event"] == "records_acknowledged":
            count = record["accepted"] + record["rejected"]
            times += [record["ts_ms"] - acquired_ms[record["member_id"]]] * count
    return times


def test_share_deliveries_agree_with_what_the_consumers_were_given(analysed: Analysed) -> None:
    scenario, given = analysed.scenario, analysed.scenario.deliveries
    counts = {entry["kind"]: entry["count"] for entry in analysed.result.input}
    assert counts["lines"] == counts["parsed"] == len(analysed.logged), analysed.result.input
    assert analysed.result.rows["share_deliveries"] >= 1

    (row,) = analysed.deliveries
    context = json.dumps(row, indent=1) + "\n" + "\n".join(map(str, given))
    assert (row["topic"], row["partition"]) == (scenario.topic, 0)
    assert row["deliveries"] == len(given) == 17, context
    assert row["records"] == len({d.offset for d in given}) == 7, context
    assert row["members"] == len({d.worker for d in given}) == 4, context
    assert row["acquisitions"] == sum(e["event"] == "records_acquired" for e in analysed.logged)
    assert row["redeliveries"] == sum(d.delivery_count > 1 for d in given) == 10, context
    assert row["max_delivery_count"] == max(d.delivery_count for d in given) == DELIVERY_LIMIT

    # Why each record came back: the releaser RELEASEd the poison record (delivery counts 2..5), the holder got
    # the closer's batch after its close() (session_closed), the receiver got it after the holder's lock expired.
    came_back = Counter(d.worker for d in given if d.delivery_count > 1)
    assert row["redeliveries_release"] == came_back["releaser"] == DELIVERY_LIMIT - 1, context
    assert row["redeliveries_session_closed"] == came_back["holder"] == 3, context
    assert row["redeliveries_lock_expired"] == came_back["receiver"] == 3, context
    assert row["redeliveries_unknown"] == 0
    assert (row["released_release"], row["released_session_closed"], row["released_lock_expired"]) == (4, 3, 3)
    assert row["lock_expiries"] == 1, context  # one lock ran out, holding the three records
    assert row["archived"] == 1, context  # the poison record, at the limit

    # Accepted: ok-0 and ok-3, then the receiver's three; rejected: reject-2. Nothing left in flight.
    assert (row["accepted"], row["rejected"], row["acknowledged"], row["in_flight_at_end"]) == (5, 1, 6, 0), context
    assert row["first_ms"] <= row["last_ms"]


def test_time_in_flight_by_how_deliveries_ended(analysed: Analysed) -> None:
    by_end = {(r["topic"], r["end"]): r for r in analysed.in_flight}
    topic = analysed.scenario.topic
    context = json.dumps(analysed.in_flight, indent=1)
    # The whole (group, run) has one partition: its rows (topic null) are the partition's.
    for (where, end), r in by_end.items():
        if where is not None:
            assert {**r, "topic": None, "partition": None} == by_end[(None, end)], context
    ended = {end: r["deliveries"] for (where, end), r in by_end.items() if where == topic}
    assert ended == {"all": 17, "acknowledged": 6, "release": 4, "archived": 1, "session_closed": 3,
                     "lock_expired": 3}, context  # fmt: skip

    expired = by_end[(topic, "lock_expired")]
    assert LOCK_MS <= expired["in_flight_ms_p50"] <= expired["in_flight_ms_max"] <= LOCK_MS + LOCK_SLACK_MS, context
    assert by_end[(topic, "all")]["in_flight_ms_max"] == expired["in_flight_ms_max"]
    for end in ("acknowledged", "release", "archived", "session_closed"):
        assert by_end[(topic, end)]["in_flight_ms_max"] < LOCK_MS, context  # all ended before their lock

    times = acknowledged_in_flight(analysed.logged)
    acknowledged = by_end[(topic, "acknowledged")]
    assert len(times) == acknowledged["deliveries"], (times, context)
    assert acknowledged["in_flight_ms_p50"] == percentile(times, 0.5), (times, context)
    assert acknowledged["in_flight_ms_p95"] == percentile(times, 0.95), (times, context)
    assert acknowledged["in_flight_ms_max"] == max(times), (times, context)


def test_report_has_the_share_section(analysed: Analysed, spark: SparkSession) -> None:
    page = render(analysed.out, spark).read_text(encoding="utf-8")
    assert '<section id="share-groups">' in page
    section = page[page.index('<section id="share-groups">') :]
    section = section[: section.index("</section>")]
    assert analysed.scenario.group in section and analysed.scenario.topic in section, section
    assert ">17<" in section and ">10<" in section, section  # deliveries, redeliveries
    assert "lock expired" in section, section
