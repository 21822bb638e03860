"""Share groups (issue 28): the job's share tables over the event log of a real ShareConsumer run.

``share_log.run_scenario`` runs the real broker and four confluent-kafka ``ShareConsumer`` processes one after the
other on a one-partition topic: RELEASEs until the delivery limit archives a record, a REJECT, a close() that
releases a poll's records (``session_closed``), a SIGSTOPped holder whose lock expires (``lock_expired``), and a
member that accepts them in the end. What the workers printed (every record they were given, with its delivery
count) is the ground truth of the deliveries; the log's own timestamps are that of the times in flight. The job
runs once (module fixture) over that log and a generated one with share groups (``generate --share-groups``, a few
thousand events: many partitions, broker restarts, every cause), whose tables must be consistent with its records;
every test reads that one run: the tables, then the report's section.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker.analytics import generate, job
from broker.analytics.report import render
from broker.analytics.synthetic.share import DELIVERY_LIMIT as GENERATED_LIMIT
from broker.analytics.synthetic.share import LOCK_MS as GENERATED_LOCK_MS
from tests.analytics.conftest import rows
from tests.analytics.share_log import Scenario, run_scenario
from tests.clients.share_processes import DELIVERY_LIMIT, LOCK_MS

#: The purgatory fires a lock's deadline within a tick of it; generous for a loaded machine.
LOCK_SLACK_MS = 500
GENERATED_EVENTS = 6000
#: Share records the reader must refuse, in a third input: without what the tables need, and of version 1 (share
#: groups came within version 2).
REFUSED = [
    '{"v":2,"seq":1,"ts_ms":1,"run_id":"hand","event":"records_acquired","group_id":"hand","member_id":"m",'
    '"topic":"t","partition":0,"records":1,"redelivered":0,"lock_duration_ms":30000,"group_type":"share"}',
    '{"v":1,"seq":2,"ts_ms":2,"run_id":"hand","event":"records_released","group_id":"hand","member_id":"m",'
    '"topic":"t","partition":0,"cause":"release","offsets":[[0,0]],"records":1}',
]


@dataclass
class Analysed:
    scenario: Scenario
    out: Path
    result: job.Result
    logged: list[dict[str, Any]]
    deliveries: list[dict[str, Any]]
    in_flight: list[dict[str, Any]]
    generated: list[dict[str, Any]]  # the generated log's records
    all_deliveries: list[dict[str, Any]]
    all_in_flight: list[dict[str, Any]]
    elsewhere: dict[str, list[dict[str, Any]]]  # the scenario's group's rows in the other tables


@pytest.fixture(scope="module")
def analysed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Analysed:
    tmp = tmp_path_factory.mktemp("share")
    scenario = run_scenario(tmp)
    synthetic = tmp / "generated.jsonl"
    generate.generate(synthetic, GENERATED_EVENTS, seed=28, share_groups=3, restarts=1)
    refused = tmp / "refused.jsonl"
    refused.write_text("".join(line + "\n" for line in REFUSED), encoding="utf-8")
    out = tmp / "analysis"
    result = job.run([str(scenario.log), str(synthetic), str(refused)], str(out), spark=spark)
    logged = [json.loads(line) for line in scenario.log.read_text().splitlines()]
    generated = [json.loads(line) for line in synthetic.read_text().splitlines()]
    every, flights = rows(spark, out, "share_deliveries"), rows(spark, out, "share_in_flight")
    share = [r for r in every if r["group_id"] == scenario.group]
    flight = [r for r in flights if r["group_id"] == scenario.group]
    elsewhere = {
        table: [r for r in rows(spark, out, table) if r["group_id"] == scenario.group]
        for table in ("rebalances", "members", "ownership", "summary", "disturbances")
    }
    return Analysed(scenario, out, result, logged, share, flight, generated, every, flights, elsewhere)


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
    assert counts["parsed"] == len(analysed.logged) + len(analysed.generated), analysed.result.input
    assert (counts["missing_field"], counts["unknown_event"]) == (1, 1), analysed.result.input
    assert counts["lines"] == counts["parsed"] + len(REFUSED)
    assert not [r for r in analysed.all_deliveries if r["group_id"] == "hand"]
    assert analysed.result.rows["share_deliveries"] >= 1
    # Its group epochs and member_left are not rebalances or memberships (the job leaves share groups out there).
    assert not any(analysed.elsewhere.values()), analysed.elsewhere

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


def test_the_generated_share_groups_tables_add_up(analysed: Analysed) -> None:
    """The generated log's share-partitions: every figure of ``share_deliveries`` against its records, and the
    deliveries' ends in ``share_in_flight`` against those figures."""
    share = [r for r in analysed.generated if r.get("group_type") == "share"]
    partitions: dict[tuple[str, str, str, int], Counter[str]] = {}
    for r in share:
        if "topic" not in r:
            continue
        c = partitions.setdefault((r["group_id"], r["run_id"], r["topic"], r["partition"]), Counter())
        c[r["event"]] += 1
        c["deliveries"] += r.get("records", 0) if r["event"] == "records_acquired" else 0
        c["redeliveries"] += r.get("redelivered", 0)
        c[f"released_{r.get('cause')}"] += r["records"] if r["event"] == "records_released" else 0
        c["archived"] += r["records"] if r["event"] == "records_archived" else 0
        c["accepted"] += r.get("accepted", 0)
        c["rejected"] += r.get("rejected", 0)
    found = {(r["group_id"], r["run_id"], r["topic"], r["partition"]): r for r in analysed.all_deliveries}
    assert set(partitions) <= set(found) and len(partitions) >= 3, sorted(found)
    causes = Counter[str]()
    for key, c in partitions.items():
        row = found[key]
        assert row["acquisitions"] == c["records_acquired"], (key, row, c)
        assert (row["deliveries"], row["redeliveries"], row["archived"]) == (
            c["deliveries"], c["redeliveries"], c["archived"]
        ), (key, row, c)  # fmt: skip
        for cause in ("release", "lock_expired", "session_closed"):
            assert row[f"released_{cause}"] == c[f"released_{cause}"], (key, cause, row, c)
            causes[cause] += row[f"redeliveries_{cause}"]
        assert (row["accepted"], row["rejected"]) == (c["accepted"], c["rejected"])
        # Every acknowledgement found its deliveries: one member, one batch at a time.
        assert row["acknowledged"] == row["accepted"] + row["rejected"], (key, row)
        by_cause = ("release", "lock_expired", "session_closed", "unknown")
        assert row["redeliveries"] == sum(row[f"redeliveries_{x}"] for x in by_cause), (key, row)
        released = sum(row[f"released_{x}"] for x in ("release", "lock_expired", "session_closed"))
        ended = row["acknowledged"] + released
        assert ended + row["archived"] + row["in_flight_at_end"] == row["deliveries"], (key, row)
        assert row["max_delivery_count"] <= GENERATED_LIMIT
    assert all(causes.values()) and len(causes) == 3, causes
    groups = {key[0] for key in partitions}
    flight = [r for r in analysed.all_in_flight if r["group_id"] in groups]
    expired = [r for r in flight if r["end"] == "lock_expired"]
    assert expired and all(
        GENERATED_LOCK_MS <= r["in_flight_ms_p50"] <= r["in_flight_ms_max"] <= GENERATED_LOCK_MS + 5 for r in expired
    ), expired
    acknowledged = [r for r in flight if r["end"] == "acknowledged"]
    assert acknowledged and all(r["in_flight_ms_max"] < GENERATED_LOCK_MS for r in acknowledged), acknowledged
    for r in flight:
        if r["topic"] is not None:
            row = found[(r["group_id"], r["run_id"], r["topic"], r["partition"])]
            total = {"all": row["deliveries"] - row["in_flight_at_end"], "open": row["in_flight_at_end"],
                     "acknowledged": row["acknowledged"], "archived": row["archived"]}  # fmt: skip
            assert r["deliveries"] == total.get(r["end"], row.get(f"released_{r['end']}")), (r, row)
