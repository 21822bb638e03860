"""Offsets and lag in ``group-broker describe`` and ``watch`` (issue 26), as a user runs them: the commands as
subprocesses against a broker in its own process, with a real kafka-python producer and a consumer that commits.

The table has ``kafka-consumer-groups.sh --describe``'s columns and prints "-" where Kafka's tool does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.cli.test_control_cli import PARTITIONS, TOPIC, Broker, cli, ok, start_broker

GROUP = "cli-lag"
PRODUCED = {0: 12, 1: 5}  # records per partition; partition 2 stays empty
COMMITTED = {0: 7, 1: 5}  # lag 5 on partition 0, 0 on partition 1, nothing committed on partition 2
HEADERS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    started = start_broker(tmp_path_factory.mktemp("lag") / "broker.log")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def consumer(broker: Broker) -> Iterator[KafkaConsumer]:
    """A member of GROUP owning the whole topic, having committed COMMITTED after PRODUCED was written."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for partition, count in PRODUCED.items():
        for n in range(count):
            producer.send(TOPIC, f"r{n}".encode(), partition=partition)
    producer.flush()
    producer.close()
    member = KafkaConsumer(
        TOPIC,
        bootstrap_servers=broker.bootstrap,
        group_id=GROUP,
        client_id="lag-cli",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
    )
    try:
        deadline = time.monotonic() + 30
        while len(member.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, "the consumer was not assigned the topic"
            member.poll(timeout_ms=200, max_records=1)
        member.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITTED.items()})
        yield member
    finally:
        member.close()


def offsets_lines(out: str) -> list[list[str]]:
    """The offsets table's rows, split into cells, header first."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["GROUP", "TOPIC"])
    return [line.split() for line in lines[start:] if line.strip()][: 1 + PARTITIONS]


def test_describe_shows_kafkas_offsets_table(broker: Broker, consumer: KafkaConsumer) -> None:
    described = json.loads(ok(cli(broker, "describe", GROUP, "--json")))["group"]
    (member,) = described["members"]
    owner = member["member_id"]
    expected = [
        HEADERS,
        [GROUP, TOPIC, "0", "7", "12", "5", owner, "/127.0.0.1", "lag-cli"],
        [GROUP, TOPIC, "1", "5", "5", "0", owner, "/127.0.0.1", "lag-cli"],
        [GROUP, TOPIC, "2", "-", "0", "-", owner, "/127.0.0.1", "lag-cli"],
    ]
    out = ok(cli(broker, "describe", GROUP))
    assert "Offsets (total lag 5):" in out
    assert offsets_lines(out) == expected
    only = ok(cli(broker, "describe", GROUP, "--offsets"))
    assert [line.split() for line in only.splitlines()] == expected

    assert [(o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"]) for o in described["offsets"]] == [
        (0, 7, 12, 5),
        (1, 5, 5, 0),
        (2, None, 0, None),
    ]
    assert described["lag"] == 5


def test_describe_of_a_group_without_members(broker: Broker, consumer: KafkaConsumer) -> None:
    """A group of committed offsets only (assign() and commit): Kafka's "-" for its owner."""
    admin = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="cli-lag-simple", enable_auto_commit=False)
    try:
        admin.assign([TopicPartition(TOPIC, 0)])
        admin.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1)})
    finally:
        admin.close()
    out = ok(cli(broker, "describe", "cli-lag-simple", "--offsets"))
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == HEADERS
    assert lines[1:] == [["cli-lag-simple", TOPIC, "0", "2", "12", "10", "-", "-", "-"]]


def test_watch_shows_the_lag_column_and_one_groups_offsets(
    broker: Broker, consumer: KafkaConsumer, tmp_path: Path
) -> None:
    out = ok(cli(broker, "watch", "--once", env={"COLUMNS": "250"}))
    lag_row = next(line.split() for line in out.splitlines() if line.split()[:1] == [GROUP])
    assert lag_row == [GROUP, "Stable", "1", "5"]  # GROUP STATE MEMBERS LAG
    assert ["GROUP", "STATE", "MEMBERS", "LAG"] in [line.split() for line in out.splitlines()]

    out = ok(cli(broker, "watch", GROUP, "--once", env={"COLUMNS": "250"}))
    assert "offsets  total lag 5" in out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.split()[:1] == [TOPIC]}
    assert [rows[p][2:5] for p in ("0", "1", "2")] == [["7", "12", "5"], ["5", "5", "0"], ["-", "0", "-"]]
    assert all(rows[p][-1] == "lag-cli" for p in rows)

    snapshot = json.loads(ok(cli(broker, "watch", GROUP, "--once", "--json")))
    (group,) = snapshot["groups"]
    assert [o["lag"] for o in group["offsets"]] == [5, 0, None] and group["lag"] == 5
