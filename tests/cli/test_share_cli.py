"""The ``group-broker`` client commands with KIP-932 share groups (issue 28), run as a user runs them (``python -m
broker ...`` subprocesses) against a broker in its own process.

Two ways to drive a share group: the raw share client of the wire tests (ShareGroupHeartbeat and ShareFetch over
TCP from this process, ``tests/wire/share_client.py``), for exact record states; and a real confluent-kafka
``ShareConsumer`` process (``tests/clients/share_worker.py``) that releases records, holds a batch and is killed.
The broker's delivery-count limit is 2, so a record released twice is archived. Every test uses its own group ids;
the broker is shared by the module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.control.client import ControlClient
from tests.cli.test_control_cli import Broker, cli, ok, start_broker
from tests.clients.share_processes import SHARE_FLAGS, ShareFleet, ShareTarget, set_group_configs
from tests.storage import make_batch
from tests.wire.client import WireClient
from tests.wire.share_client import Acks, acquired, heartbeat, set_group_config, share_fetch
from tests.wire.test_data_plane import produce_request

JOBS = "jobs"  # two partitions: the raw client's
QUEUE = "queue"  # one partition: the real ShareConsumer's
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(
        tmp_path_factory.mktemp("share-cli") / "broker.log",
        *SHARE_FLAGS, "--group-share-delivery-count-limit", "2", "--topic", f"{JOBS}:2", "--topic", f"{QUEUE}:1",
    )  # fmt: skip
    yield started
    started.stop()


@pytest.fixture
def api(broker: Broker) -> ControlClient:
    return broker.api()


def section(out: str, heading: str) -> list[list[str]]:
    """The rows (split on whitespace) of the table under the line starting with ``heading``, header row first."""
    lines = out.split("\n" + heading, 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [line.split() for line in lines]


def header_lines(out: str) -> dict[str, str]:
    head = out.split("\n\n", 1)[0].splitlines()
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in head}


def eventually(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


async def test_describe_shows_share_members_partitions_and_records(broker: Broker, api: ControlClient) -> None:
    group = "sg-cli-raw"
    client = await WireClient.connect(broker.port, "raw-share")
    try:
        join = await client.call(heartbeat(group, "m1", 0, (JOBS,)))
        assert join.member_epoch == 1
        topic_id = join.assignment.topic_partitions[0].topic_id
        await set_group_config(client, group, share_auto_offset_reset="earliest",
                               share_record_lock_duration_ms="60000")  # fmt: skip
        for partition in (0, 1):
            await client.call(produce_request(11, [(partition, make_batch(5))], topic=JOBS))
        first = await client.call(share_fetch(group, "m1", 0, topic_id, [0, 1]))
        assert acquired(first, 0) == [(0, 4, 1)] and acquired(first, 1) == [(0, 4, 1)]
        # Partition 0: ACCEPT 0, RELEASE 1 (redelivered with count 2), REJECT 2, ACCEPT 3-4; partition 1 stays held.
        acks: Acks = {0: [(0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 2, (REJECT,)), (3, 4, (ACCEPT,))]}
        again = await client.call(share_fetch(group, "m1", 1, topic_id, [], acks=acks))
        assert acquired(again, 0) == [(1, 1, 2)]

        header, *rows = ok(cli(broker, "groups", "--type", "share")).splitlines()
        assert header.split() == ["GROUP", "TYPE", "STATE", "GENERATION", "PROTOCOL", "MEMBERS", "LEADER"]
        assert [r.split() for r in rows] == [[group, "share", "Stable", "1", "share/simple", "1", "-"]]

        out = ok(cli(broker, "chaos", "wait", group, "--state", "Stable", "--members", "1", "--min-generation", "1"))
        assert out.strip() == f"group {group}: Stable, epoch 1, 1 member"

        out = ok(cli(broker, "describe", group))
        facts = header_lines(out)
        assert (facts["Type"], facts["State"].split()[0]) == ("share", "Stable")
        assert (facts["Epoch"], facts["Assignor"], facts["Topics"]) == ("1, target assignment 1", "simple", JOBS)
        assert "Generation" not in facts and "Leader" not in facts
        members = section(out, "Members (1):")
        assert " ".join(members[0]) == "MEMBER ID CLIENT ID HOST EPOCH LAST HEARTBEAT SUBSCRIBED ASSIGNMENT"
        m1 = members[1]
        assert m1[:4] == ["m1", "raw-share", "/127.0.0.1", "1"] and m1[-2:] == [JOBS, f"{JOBS}[0,1]"]
        partitions = section(out, "Share partitions (2):")
        assert partitions == [
            ["TOPIC", "PARTITION", "SPSO", "SPEO", "LOG-END", "IN-FLIGHT", "AVAILABLE", "ACQUIRED", "ACKNOWLEDGED",
             "ARCHIVED", "DELIVERIES", "REDELIVERIES"],
            [JOBS, "0", "1", "4", "5", "4", "0", "1", "2", "1", "6", "1"],
            [JOBS, "1", "0", "4", "5", "5", "0", "5", "0", "0", "5", "0"],
        ]  # fmt: skip
        assert "In-flight records" not in out  # only with --records
        assert "Offsets (total lag" not in out  # a share group commits no offsets
        events = "\n".join(" ".join(r) for r in section(out, "Latest events ("))
        assert f"records_released member_id=m1 cause=release partition={JOBS}-0 offsets=1 records=1" in events
        assert f"records_acquired member_id=m1 partition={JOBS}-0 offsets=1 records=1 delivery_count=2" in events
        assert f"records_acknowledged member_id=m1 partition={JOBS}-0 accepted=3 rejected=1" in events

        out = ok(cli(broker, "describe", group, "--records"))
        records = section(out, "In-flight records (4 runs):")
        assert records[0] == ["TOPIC", "PARTITION", "OFFSETS", "RECORDS", "STATE", "DELIVERY", "COUNT", "MEMBER",
                              "LOCK", "LEFT"]  # fmt: skip
        assert [r[:7] for r in records[1:]] == [
            [JOBS, "0", "1", "1", "acquired", "2", "m1"],
            [JOBS, "0", "2", "1", "archived", "1", "-"],
            [JOBS, "0", "3-4", "2", "acknowledged", "1", "-"],
            [JOBS, "1", "0-4", "5", "acquired", "1", "m1"],
        ]
        held = [r for r in records[1:] if r[4] == "acquired"]
        assert all(r[7].endswith("s") and float(r[7].rstrip("s")) > 30 for r in held), held  # a 60 s lock
        assert all(r[7] == "-" for r in records[1:] if r[4] != "acquired")

        # RELEASE offset 1 again: at the limit (2 deliveries) it is archived, and the SPSO moves past it.
        await client.call(share_fetch(group, "m1", 2, topic_id, [], acks={0: [(1, 1, (RELEASE,))]}))
        out = ok(cli(broker, "describe", group, "--records"))
        assert section(out, "Share partitions (2):")[1] == [JOBS, "0", "5", "4", "5", "0", "0", "0", "0", "0", "6",
                                                            "1"]  # fmt: skip
        assert [r[:2] for r in section(out, "In-flight records (1 run):")[1:]] == [[JOBS, "1"]]
        events = "\n".join(" ".join(r) for r in section(out, "Latest events ("))
        assert (f"records_archived member_id=m1 cause=delivery_limit partition={JOBS}-0 offsets=1 records=1 "
                "delivery_count=2") in events  # fmt: skip

        shown = json.loads(ok(cli(broker, "describe", group, "--records", "--json")))
        assert shown["group"]["group_type"] == "share"
        [p0, p1] = shown["share_records"]["partitions"]
        assert (p0["start_offset"], p0["records"]) == (5, [])
        assert [(r["first_offset"], r["last_offset"], r["member_id"]) for r in p1["records"]] == [(0, 4, "m1")]
        assert "share_records" not in json.loads(ok(cli(broker, "describe", group, "--json")))
        snapshot = json.loads(ok(cli(broker, "watch", group, "--once", "--json")))
        assert [p["start_offset"] for p in snapshot["share_records"]["partitions"]] == [5, 0]
        assert {e["group_type"] for e in snapshot["events"]} == {"share"}

        # Every group's view: the share group's row has no lag, its table the share members' columns.
        out = ok(cli(broker, "watch", "--once"))
        summary, title = [line.split() for line in out.splitlines() if line.split()[:1] == [group]]
        assert summary == [group, "Stable", "1", "-"]  # the groups table comes first, then each group's
        assert title[:6] == [group, "Stable", "epoch", "1", "share/simple", "1"], title
        assert "SUBSCRIBED" in out and "share partitions" not in out  # the share-partitions: watching one group

        offsets = ok(cli(broker, "describe", group, "--offsets")).splitlines()
        assert offsets[0].split()[:4] == ["TOPIC", "PARTITION", "SPSO", "SPEO"] and len(offsets) == 3
    finally:
        await client.close()


async def test_describe_of_a_share_group_that_has_not_fetched(broker: Broker) -> None:
    group = "sg-cli-new"
    client = await WireClient.connect(broker.port, "raw-new")
    try:
        await client.call(heartbeat(group, "m9", 0, (QUEUE,)))
        out = ok(cli(broker, "describe", group, "--records"))
        assert "Share partitions: none (no member has fetched yet)" in out
        assert "In-flight records: none" in out
        assert ok(cli(broker, "describe", group, "--offsets")).strip() == (
            f"Share group '{group}' has not fetched from any partition yet."
        )
    finally:
        await client.close()


def test_watch_and_describe_follow_a_real_share_consumer(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    """A ShareConsumer RELEASEs its first delivery, holds the second (delivery count 2) and is SIGKILLed: describe
    names it as the holder, watch shows the release, the redelivery and, after the kill, the records archived at the
    delivery limit. A second one holds new records and is killed too: they are released (session_closed)."""
    group = "sg-cli-real"
    target = ShareTarget(broker.bootstrap, None)
    fleet = ShareFleet(target, tmp_path, group, QUEUE)
    try:
        assert set_group_configs(target, group, {"share.auto.offset.reset": "earliest",
                                                 "share.record.lock.duration.ms": "60000"})  # fmt: skip
        fleet.produce([f"r{i}" for i in range(5)], one_batch=True)
        worker = fleet.start("holder", "--mode", "explicit", "--release", "r", "--release-times", "1",
                             "--hold-after-batches", "2")  # fmt: skip
        fleet.wait(lambda: bool(worker.events("holding")), "the worker to hold its second delivery")
        assert [d.delivery_count for d in worker.deliveries()] == [1] * 5 + [2] * 5
        [member] = api.group(group)["members"]
        member_id = member["member_id"]

        out = ok(cli(broker, "describe", group, "--records"))
        assert section(out, "Members (1):")[1][:2] == [member_id, "holder"]
        assert section(out, "Share partitions (1):")[1] == [QUEUE, "0", "0", "4", "5", "5", "0", "5", "0", "0", "10",
                                                            "5"]  # fmt: skip
        [run] = section(out, "In-flight records (1 run):")[1:]
        assert run[:7] == [QUEUE, "0", "0-4", "5", "acquired", "2", member_id]

        out = ok(cli(broker, "watch", group, "--once"))
        assert "share partitions" in out and "in-flight records" in out and "holder" in out
        assert f"member_id={member_id} cause=release partition={QUEUE}-0 offsets=0-4 records=5" in out
        assert "delivery_count=2 redelivered=5" in out

        # The connection drops: its share session ends. What it held had been delivered twice, the limit: archived.
        worker.kill()
        eventually(lambda: api.group(group)["share_partitions"][0]["start_offset"] == 5, "the held records archived")
        out = ok(cli(broker, "watch", group, "--once"))
        assert f"member_id={member_id} cause=delivery_limit partition={QUEUE}-0 offsets=0-4 records=5" in out
        assert "share_session_closed" in out

        # A second consumer holds a first delivery; killed, it releases that (session_closed) for the next one.
        produced = fleet.produce([f"s{i}" for i in range(3)], one_batch=True)
        assert [p.offset for p in produced] == [5, 6, 7]
        second = fleet.start("second", "--mode", "explicit", "--hold-after-batches", "1")
        fleet.wait(lambda: bool(second.events("holding")), "the second worker to hold its first delivery")
        out = ok(cli(broker, "describe", group, "--records"))
        members = {row[1]: row for row in section(out, "Members (")[1:]}
        assert members["second"][-1] == f"{QUEUE}[0]"  # both members are assigned the one partition
        [run] = section(out, "In-flight records (1 run):")[1:]
        second_id = members["second"][0]
        assert run[:7] == [QUEUE, "0", "5-7", "3", "acquired", "1", second_id]
        second.kill()
        eventually(lambda: api.group(group)["share_partitions"][0]["available"] == 3, "the held records released")
        out = ok(cli(broker, "watch", group, "--once"))
        assert f"member_id={second_id} cause=session_closed partition={QUEUE}-0 offsets=5-7 records=3" in out
        out = ok(cli(broker, "describe", group, "--records"))
        [run] = section(out, "In-flight records (1 run):")[1:]
        assert run == [QUEUE, "0", "5-7", "3", "available", "1", "-", "-"]
    finally:
        fleet.close()
