"""``group-broker reset-offsets``, ``delete-offsets`` and ``delete-group`` (issue 26), run as a user runs them
(``python -m broker ...`` subprocesses, over the Kafka protocol) against a broker in its own process.

Records are produced and offsets committed by real kafka-python clients; what a consumer of the group reads next
and what kafka-python's admin client fetches are the proof. Members are kafka-python consumer processes (classic
groups) and ConsumerGroupHeartbeat members (KIP-848 consumer groups). The broker runs with debug events to a file,
so the event log can be checked too. Every test uses its own group ids; the broker is shared by the module.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from broker.control.client import ControlClient
from tests.cli.test_control_cli import PARTITIONS, TOPIC, Broker, consumers, ok, stable, start_broker
from tests.conftest import ROOT, free_port
from tests.control.consumer_members import MembersThread

PER_PARTITION = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    where = tmp_path_factory.mktemp("offsets-cli")
    started = start_broker(where / "broker.log", "--log-level", "debug", "--event-log", str(where / "events.jsonl"))
    producer = KafkaProducer(bootstrap_servers=started.bootstrap)
    for i in range(PER_PARTITION * PARTITIONS):
        producer.send(TOPIC, value=b"r%d" % i, partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    yield started
    started.stop()


@pytest.fixture
def api(broker: Broker) -> ControlClient:
    return broker.api()


def run(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    """``group-broker ARGS --bootstrap HOST:PORT``."""
    return subprocess.run(
        [sys.executable, "-m", "broker", *args, "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )


def plan_rows(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], stdout
    return [line.split() for line in lines[1:]]


def commit_all(broker: Broker, group: str, topic: str = TOPIC) -> int:
    """A kafka-python consumer of the group reads everything and commits; how many records it read."""
    return len(read(broker, group, topic, commit=True))


def read(broker: Broker, group: str, topic: str = TOPIC, commit: bool = False) -> list[tuple[int, int]]:
    """(partition, offset) of what a kafka-python consumer of the group reads from its committed offsets."""
    consumer = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=2500,
    )
    try:
        seen = [(record.partition, record.offset) for record in consumer]
        if commit:
            consumer.commit()
    finally:
        consumer.close()
    return seen


def committed(broker: Broker, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in answer.items() if meta.offset >= 0}


def events(broker: Broker, group: str) -> list[dict[str, Any]]:
    path = broker.log_path.parent / "events.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [record for record in records if record["group_id"] == group]


def test_dry_run_changes_nothing_and_execute_makes_a_consumer_read_again(broker: Broker) -> None:
    group = "reset-earliest"
    assert commit_all(broker, group) == PER_PARTITION * PARTITIONS
    before = committed(broker, group)
    assert before == {(TOPIC, p): PER_PARTITION for p in range(PARTITIONS)}

    result = run(broker, "reset-offsets", group, "--all-topics", "--to-earliest")
    assert result.returncode == 0, result.stderr
    assert "No action will be performed as the --execute option is missing" in result.stderr
    assert plan_rows(result.stdout) == [[group, TOPIC, str(p), "0"] for p in range(PARTITIONS)]
    dry = run(broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--dry-run")
    assert dry.returncode == 0 and "No action" not in dry.stderr
    assert committed(broker, group) == before
    assert read(broker, group) == []  # nothing left to read: the dry runs committed nothing

    ok(run(broker, "reset-offsets", group, "--topic", f"{TOPIC}:0,2", "--to-earliest", "--execute"))
    assert committed(broker, group) == {(TOPIC, 0): 0, (TOPIC, 1): PER_PARTITION, (TOPIC, 2): 0}
    seen = read(broker, group)
    assert sorted(seen) == sorted((p, o) for p in (0, 2) for o in range(PER_PARTITION))

    commits = [e for e in events(broker, group) if e["event"] == "offsets_committed" and e["member_id"] == ""]
    assert len(commits) == 1  # the reset: an admin commit, generation -1
    assert commits[0]["generation_id"] == -1
    assert sorted(map(tuple, commits[0]["offsets"])) == [(TOPIC, 0, 0), (TOPIC, 2, 0)]


def test_to_offset_and_shift_by_are_kept_within_the_log_with_kafkas_warning(broker: Broker) -> None:
    group = "reset-clamp"
    commit_all(broker, group)
    out = run(broker, "reset-offsets", group, "--topic", f"{TOPIC}:1", "--to-offset", "50", "--execute")
    assert out.returncode == 0, out.stderr
    assert plan_rows(out.stdout) == [[group, TOPIC, "1", str(PER_PARTITION)]]
    assert (f"New offset (50) is higher than latest offset for topic partition {TOPIC}-1. Value will be set to "
            f"{PER_PARTITION}") in out.stderr

    ok(run(broker, "reset-offsets", group, "--topic", TOPIC, "--shift-by", "-3", "--execute"))
    assert committed(broker, group) == {(TOPIC, p): PER_PARTITION - 3 for p in range(PARTITIONS)}
    assert len(read(broker, group)) == 3 * PARTITIONS

    out = run(broker, "reset-offsets", group, "--topic", f"{TOPIC}:0", "--shift-by", "-100", "--execute", "--json")
    answer = json.loads(out.stdout)
    assert answer["offsets"] == [{"topic": TOPIC, "partition": 0, "new_offset": 0}] and answer["executed"] is True
    assert answer["warnings"] == [f"New offset ({PER_PARTITION - 3 - 100}) is lower than earliest offset for topic "
                                  f"partition {TOPIC}-0. Value will be set to 0"]
    assert committed(broker, group)[(TOPIC, 0)] == 0


def test_a_group_that_does_not_exist_is_created_by_the_reset(broker: Broker, api: ControlClient) -> None:
    group = "reset-new"
    ok(run(broker, "reset-offsets", group, "--topic", f"{TOPIC}:1", "--to-offset", "4", "--execute"))
    assert committed(broker, group) == {(TOPIC, 1): 4}
    assert api.group(group)["state"] == "Empty"
    # --shift-by needs a committed offset, as Kafka's tool says.
    result = run(broker, "reset-offsets", group, "--topic", f"{TOPIC}:2", "--shift-by", "1", "--execute")
    assert result.returncode == 2
    assert f"Cannot shift offset for partition {TOPIC}-2 since there is no current committed offset" in result.stderr


def test_to_datetime_and_by_duration_ask_list_offsets_by_timestamp(broker: Broker) -> None:
    topic, group = "stamped", "reset-time"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(4):
        producer.send(topic, value=b"early%d" % i, partition=0)
    producer.flush()
    time.sleep(0.3)
    middle = datetime.now(UTC)
    time.sleep(0.3)
    for i in range(3):
        producer.send(topic, value=b"late%d" % i, partition=0)
    producer.flush()
    producer.close()
    commit_all(broker, group, topic)

    stamp = middle.strftime("%Y-%m-%dT%H:%M:%S.") + f"{middle.microsecond // 1000:03d}"  # Kafka's form, UTC
    ok(run(broker, "reset-offsets", group, "--topic", topic, "--to-datetime", stamp, "--execute"))
    assert committed(broker, group) == {(topic, 0): 4}
    assert [offset for _, offset in read(broker, group, topic)] == [4, 5, 6]

    out = run(broker, "reset-offsets", group, "--topic", topic, "--to-datetime", "2999-01-01T00:00:00.000+02:00",
              "--dry-run")
    assert plan_rows(out.stdout) == [[group, topic, "0", "7"]]
    assert f"Warn: Partition 0 from topic {topic} is empty. Falling back to latest known offset." in out.stderr

    ok(run(broker, "reset-offsets", group, "--topic", topic, "--by-duration", "P1DT2H", "--execute"))
    assert committed(broker, group) == {(topic, 0): 0}


def test_refused_while_a_classic_group_has_members(broker: Broker, api: ControlClient, tmp_path: Path) -> None:
    group = "reset-busy"
    commit_all(broker, group)
    with consumers(broker, group, tmp_path, 1) as started:
        stable(api, group, 1)
        result = run(broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
        assert result.returncode == 1
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
                "is Stable.") in result.stderr
        assert result.stdout.strip() == ""
        assert committed(broker, group) == {(TOPIC, p): PER_PARTITION for p in range(PARTITIONS)}

        refused = run(broker, "delete-group", group)
        assert refused.returncode == 1
        assert refused.stdout.splitlines() == [
            "Error: Deletion of some consumer groups failed:",
            f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty.",
        ]
        # KIP-496: a Stable consumer-protocol group keeps the offsets of the topics it subscribes to.
        refused = run(broker, "delete-offsets", group, "--topic", TOPIC)
        assert refused.returncode == 1
        assert refused.stdout.count("Error: :GROUP_SUBSCRIBED_TO_TOPIC") == PARTITIONS
        for consumer in started:
            consumer.stop()
    api.wait(group, state="Empty", timeout_ms=20_000)
    ok(run(broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"))
    assert committed(broker, group) == {(TOPIC, p): 0 for p in range(PARTITIONS)}


def test_a_consumer_group_is_refused_while_members_are_in_and_reset_once_they_left(
    broker: Broker, api: ControlClient
) -> None:
    group = "reset-cg"
    with MembersThread(broker.port, group, 1, topics=(TOPIC,)):
        api.wait(group, state="Stable", members=1, timeout_ms=20_000)
        result = run(broker, "reset-offsets", group, "--topic", TOPIC, "--to-latest", "--execute")
        assert result.returncode == 1
        assert f"the group '{group}' is inactive, but the current state is Stable." in result.stderr
        # OffsetDelete on a consumer group with members: refused per partition for the topic it subscribes to.
        refused = run(broker, "delete-offsets", group, "--topic", f"{TOPIC}:0")
        assert refused.returncode == 1
        lines = [line.split(None, 2) for line in refused.stdout.splitlines() if line.strip()]
        assert lines[0] == ["Error:", "Encounter", "some partition level error, see the follow-up details:"]
        assert lines[2] == [TOPIC, "0", "Error: :GROUP_SUBSCRIBED_TO_TOPIC: The consumer group is actively "
                                        "subscribed to the topic"]
    api.wait(group, state="Empty", timeout_ms=20_000)
    assert api.group(group)["group_type"] == "consumer"
    out = ok(run(broker, "reset-offsets", group, "--topic", TOPIC, "--to-latest", "--execute"))
    assert plan_rows(out) == [[group, TOPIC, str(p), str(PER_PARTITION)] for p in range(PARTITIONS)]
    assert committed(broker, group) == {(TOPIC, p): PER_PARTITION for p in range(PARTITIONS)}
    commits = [e for e in events(broker, group) if e["event"] == "offsets_committed"]
    assert commits and commits[-1]["group_type"] == "consumer" and commits[-1]["generation_id"] == -1

    out = ok(run(broker, "delete-offsets", group, "--topic", f"{TOPIC}:0,1"))
    assert out.splitlines()[0] == f"Request succeed for deleting offsets with topic {TOPIC}:0,1 group {group}"
    assert [line.split() for line in out.splitlines()[2:]] == [
        ["TOPIC", "PARTITION", "STATUS"], [TOPIC, "0", "Successful"], [TOPIC, "1", "Successful"]]
    assert committed(broker, group) == {(TOPIC, 2): PER_PARTITION}
    deleted = [e for e in events(broker, group) if e["event"] == "offsets_deleted"]
    assert [sorted(map(tuple, e["offsets"])) for e in deleted] == [[(TOPIC, 0), (TOPIC, 1)]]

    out = ok(run(broker, "delete-group", group))
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    assert events(broker, group)[-1]["event"] == "group_deleted"
    assert committed(broker, group) == {}


def test_delete_group_names_each_failure(broker: Broker) -> None:
    ok(run(broker, "reset-offsets", "del-a", "--topic", f"{TOPIC}:0", "--to-earliest", "--execute"))
    result = run(broker, "delete-group", "del-a", "del-missing")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "Error: Deletion of some consumer groups failed:",
        "* Group 'del-missing' could not be deleted due to: GROUP_ID_NOT_FOUND: The group id does not exist.",
        "",
        "These consumer groups were deleted successfully: 'del-a'",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to-earliest"], "one of the arguments --topic --all-topics is required"),
        (["--all-topics"], "one of the arguments --to-earliest"),
        (["--all-topics", "--to-earliest", "--to-latest"], "not allowed with argument"),
        (["--all-topics", "--to-earliest", "--execute", "--dry-run"], "not allowed with argument"),
        (["--topic", f"{TOPIC}:x", "--to-earliest"], f"Invalid partition 'x' specified in topic arg '{TOPIC}:x'"),
        (["--topic", f"{TOPIC}:9", "--to-earliest"], f"Error getting starting offset of topic partition: {TOPIC}-9"),
        (["--all-topics", "--by-duration", "1h"], "Text cannot be parsed to a Duration"),
        (["--all-topics", "--to-datetime", "2026-01-01"], "It does not contain a 'T' according to ISO8601 format"),
        (["--all-topics", "--to-offset", "ten"], "invalid int value"),
    ],
)
def test_bad_usage_exits_2_and_commits_nothing(broker: Broker, args: list[str], message: str) -> None:
    group = "reset-bad"
    result = run(broker, "reset-offsets", group, *args, "--execute" if "--dry-run" not in args else "--json")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert committed(broker, group) == {}


def test_an_unknown_topic_and_an_unreachable_broker_exit_1(broker: Broker) -> None:
    result = run(broker, "reset-offsets", "reset-x", "--topic", "no-such-topic", "--to-earliest", "--execute")
    assert result.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in result.stderr
    gone = subprocess.run(
        [sys.executable, "-m", "broker", "delete-group", "g", "--bootstrap", f"127.0.0.1:{free_port()}",
         "--wait-for-broker", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert gone.returncode == 1 and "cannot reach the broker" in gone.stderr
    # Bad usage is told before any broker is asked: exit 2 even with none there.
    usage = subprocess.run(
        [sys.executable, "-m", "broker", "reset-offsets", "g", "--all-topics", "--by-duration", "PT",
         "--bootstrap", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert usage.returncode == 2 and "Text cannot be parsed to a Duration" in usage.stderr


def test_a_broker_that_is_starting_is_waited_for(tmp_path: Path) -> None:
    """--wait-for-broker (broker/control/grace.py) around the admin client's one connect()."""
    port = free_port()
    command = subprocess.Popen(
        [sys.executable, "-m", "broker", "reset-offsets", "waited", "--topic", f"{TOPIC}:0", "--to-latest",
         "--execute", "--bootstrap", f"127.0.0.1:{port}", "--wait-for-broker", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        time.sleep(1.0)
        assert command.poll() is None  # still waiting: nothing listens yet
        late = start_broker(tmp_path / "late.log", "--port", str(port))
        try:
            out, err = command.communicate(timeout=60)
            assert command.returncode == 0, err
            assert plan_rows(out) == [["waited", TOPIC, "0", "0"]]
        finally:
            late.stop()
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
