"""KIP-848 consumer groups seen through confluent-kafka 2.16's AdminClient, beside classic groups, and their commits.

The broker and worker processes are those of ``test_consumer_protocol.py`` (its module docstring says how they
run). Here: ``describe_consumer_groups`` shows a consumer group's type, members and assignments (ConsumerGroupDescribe,
kip-848-consumer-groups.md section 9.3) and a classic group's through librdkafka's DescribeGroups fallback (section
12.6); ``list_consumer_groups`` filters by type (ListGroups v5 TypesFilter, section 9.1, checklist item 101); a
classic and a consumer-protocol group share a broker and a topic (5, 6); a consumer-protocol member commits with its
member epoch (OffsetCommit v9, section 8.1) and reads its commits back (OffsetFetch v9, section 8.2) (7).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing.embedded import EmbeddedBroker
from tests.clients.test_consume_failover import (
    TOPIC,
    assert_every_record_seen,
    consumed,
    duplicates,
    end_offsets,
    keys,
    produce,
    stop_all,
)
from tests.clients.test_consumer_protocol import (
    DEADLINE_S,
    PARTITIONS,
    Processes,
    consumer_group_broker,
    split,
    unique,
    worker_processes,
)


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with consumer_group_broker() as running:
        yield running


@pytest.fixture
def procs(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Processes]:
    with worker_processes(broker, tmp_path) as processes:
        yield processes


def admin_client(running: EmbeddedBroker) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": running.bootstrap})


def describe(admin: Any, *groups: str) -> dict[str, Any]:
    futures = admin.describe_consumer_groups(list(groups), request_timeout=10)
    return {group: future.result(timeout=DEADLINE_S) for group, future in futures.items()}


def listed(admin: Any, **filters: Any) -> dict[str, Any]:
    """The groups ListGroups returns (with ``states=`` / ``types=`` filters), by id; errors fail the test."""
    result = admin.list_consumer_groups(request_timeout=10, **filters).result(timeout=DEADLINE_S)
    assert not result.errors, result.errors
    return {listing.group_id: listing for listing in result.valid}


def assignment_of(member: Any) -> frozenset[int]:
    partitions = member.assignment.topic_partitions if member.assignment is not None else []
    assert all(tp.topic == TOPIC for tp in partitions), partitions
    return frozenset(tp.partition for tp in partitions)


def eventually(read: Callable[[], Any], holds: Callable[[Any], bool], what: str, timeout: float = DEADLINE_S) -> Any:
    """``read()`` again and again until ``holds`` its value; the value, or a failure showing the last one."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if holds(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last seen: {value!r}")
        time.sleep(0.1)


@pytest.mark.timeout(60)
def test_admin_describes_and_lists_consumer_groups_by_type(procs: Processes) -> None:
    """Two consumer-protocol members and one classic member, in two groups: describe shows each group's type, its
    members (client id, host, client-generated member id) and their assignments; list filters by type."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    modern, classic = unique("modern"), unique("classic")
    members = [procs.start(f"m{i}", modern) for i in range(2)]
    old = procs.start("k0", classic, protocol="classic")
    procs.wait(lambda: split(members) and old.owned == PARTITIONS, "both groups to settle")
    admin = admin_client(procs.broker)

    # The group is Stable once every member acknowledged its assignment (section 3.4): poll until then.
    described = eventually(
        lambda: describe(admin, modern, classic),
        lambda d: d[modern].state == ConsumerGroupState.STABLE and d[classic].state == ConsumerGroupState.STABLE,
        "both groups to be described as Stable",
    )
    group = described[modern]
    assert group.type == ConsumerGroupType.CONSUMER, group
    assert not group.is_simple_consumer_group
    assert group.partition_assignor == "uniform", group  # the first of group.consumer.assignors (section 6.2)
    by_client = {member.client_id: member for member in group.members}
    assert sorted(by_client) == ["m0", "m1"], group.members
    for worker in members:
        member = by_client[worker.name]
        assert member.member_id == worker.member_id, (member.member_id, worker.member_id)
        assert "127.0.0.1" in member.host, member.host
        assert member.group_instance_id is None
        assert assignment_of(member) == worker.owned, (member, worker.owned)
        # Stable: nothing pending, the target is what the member has (section 9.3).
        assert member.target_assignment is not None and assignment_of(member) == frozenset(
            tp.partition for tp in member.target_assignment.topic_partitions
        ), member

    old_group = described[classic]
    assert old_group.type == ConsumerGroupType.CLASSIC, old_group
    assert old_group.partition_assignor == "range", old_group  # librdkafka's first classic assignor
    [old_member] = old_group.members
    assert old_member.client_id == "k0" and old_member.member_id == old.member_id, old_member
    assert assignment_of(old_member) == PARTITIONS

    everything = listed(admin)
    assert set(everything) == {modern, classic}, everything
    assert everything[modern].type == ConsumerGroupType.CONSUMER, everything[modern]
    assert everything[classic].type == ConsumerGroupType.CLASSIC, everything[classic]
    assert set(listed(admin, types={ConsumerGroupType.CONSUMER})) == {modern}
    assert set(listed(admin, types={ConsumerGroupType.CLASSIC})) == {classic}
    assert set(listed(admin, types={ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC})) == {modern, classic}
    assert set(listed(admin, states={ConsumerGroupState.STABLE})) == {modern, classic}
    stop_all([*members, old])


@pytest.mark.timeout(60)
def test_classic_and_consumer_groups_side_by_side(procs: Processes) -> None:
    """A classic group and a consumer-protocol group on one topic each read every record once, independently: the
    classic member joins with JoinGroup/SyncGroup and a broker-made member id, the other heartbeats with its own."""
    modern, classic = unique("modern"), unique("classic")
    new = [procs.start(f"m{i}", modern) for i in range(2)]
    old = [procs.start(f"k{i}", classic, protocol="classic") for i in range(2)]
    procs.wait(lambda: split(new) and split(old), "both groups to split the topic")
    # Member ids: the classic coordinator makes "<client.id>-<uuid>" (JoinGroup, MEMBER_ID_REQUIRED); librdkafka
    # makes a consumer-protocol member's itself, 22 characters of base64 (section 12.2).
    assert all(w.member_id.startswith(f"{w.name}-") for w in old), [w.member_id for w in old]
    assert all(len(w.member_id) == 22 for w in new), [w.member_id for w in new]

    produced = produce("confluent", procs.broker.bootstrap, keys("both", 400))
    procs.wait(lambda: consumed(produced, new)() and consumed(produced, old)(), "both groups to consume everything")
    for workers in (new, old):
        assert_every_record_seen(produced, workers)
        assert not duplicates(workers), duplicates(workers)
    stop_all([*new, *old])


def consumer_config(broker: EmbeddedBroker, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",  # no session.timeout.ms / heartbeat.interval.ms: refused (section 12.1)
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }


def consume_until(consumer: Any, done: Callable[[list[tuple[int, int, str]]], bool], what: str) -> list[Any]:
    """Records (partition, offset, key) from ``consumer`` until ``done`` holds for them (or fail)."""
    records: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + DEADLINE_S
    while not done(records):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {len(records)} records, {consumer.assignment()}")
        for message in consumer.consume(num_messages=100, timeout=0.1):
            assert message.error() is None, message.error()
            records.append((message.partition(), message.offset(), message.key().decode()))
    return records


@pytest.mark.timeout(60)
def test_commit_and_committed_with_the_member_epoch(broker: EmbeddedBroker) -> None:
    """commit() sends OffsetCommit v9 carrying the member id and epoch (section 12.6), accepted while the epoch is
    current (section 8.1, checklist item 89); committed() reads them back (OffsetFetch v9 with member id null and
    epoch -1, section 8.2), as does the AdminClient; a later member of the group resumes from them."""
    from confluent_kafka import OFFSET_INVALID, Consumer, ConsumerGroupTopicPartitions, TopicPartition

    group = unique("commits")
    first = produce("confluent", broker.bootstrap, keys("commit1", 120))
    wanted = {(p.partition, p.offset) for p in first}
    ends = end_offsets(first)

    consumer = Consumer(consumer_config(broker, group))
    consumer.subscribe([TOPIC])
    try:
        records = consume_until(consumer, lambda got: wanted <= {(p, o) for p, o, _ in got}, "the first records")
        assert {tp.partition for tp in consumer.assignment()} == PARTITIONS  # the only member has all of them
        # One member, no epoch change in flight (trap 12.7.8): the commit's epoch is the current one.
        result = consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in ends.items()], asynchronous=False)
        assert result is not None and all(tp.error is None for tp in result), result
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in sorted(PARTITIONS)], timeout=10)
        assert all(tp.error is None for tp in committed), committed
        assert {tp.partition: tp.offset for tp in committed} == {p: ends.get(p, OFFSET_INVALID) for p in PARTITIONS}
        assert len(records) == len(first)
    finally:
        consumer.close()  # leaves with epoch -1: the group is Empty, its offsets stay (section 8.5)

    admin = admin_client(broker)
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    fetched = future.result(timeout=DEADLINE_S)
    assert {tp.partition: tp.offset for tp in fetched.topic_partitions if tp.offset >= 0} == ends

    second = produce("confluent", broker.bootstrap, keys("commit2", 60))
    successor = Consumer(consumer_config(broker, group))
    successor.subscribe([TOPIC])
    try:
        later = {(p.partition, p.offset) for p in second}
        records = consume_until(successor, lambda got: later <= {(p, o) for p, o, _ in got}, "the later records")
        # It started at the commits: nothing of the first batch again.
        assert {(p, o) for p, o, _ in records} == later, sorted({(p, o) for p, o, _ in records} - later)
    finally:
        successor.close()
