"""CreateTopics and CreatePartitions with manual replica assignments against ``serve --nodes 3`` (issue 29), through
real admin clients: confluent-kafka's ``NewTopic(replica_assignment=...)`` and kafka-python's ``KafkaAdminClient``.

Kafka's controller (ReplicationControlManager.createTopic / createPartitions / validateManualPartitionAssignment)
places each partition's replicas exactly as given, the first running one leading, and a failover walks that order;
it refuses with INVALID_REPLICA_ASSIGNMENT an unknown or repeated broker id, partitions not numbered 0..n-1, a
replica count unlike the earlier partitions' (or the topic's, when partitions are added), replicas that all are
stopped; and with INVALID_REQUEST NumPartitions or ReplicationFactor not -1 beside assignments. validateOnly checks
all of it and creates nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster(tmp_path_factory.mktemp("assignments"))
    yield started
    started.close()


def confluent_admin(cluster: Cluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})


def placement(cluster: Cluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR), as confluent-kafka's Metadata shows them."""
    found = confluent_admin(cluster).list_topics(topic, timeout=10).topics[topic]
    assert found.error is None, found.error
    return {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in sorted(found.partitions.items())}


def kafka_python_admin(cluster: Cluster) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)


def created(answer: Any) -> dict[str, tuple[str, str | None]]:
    """kafka-python's CreateTopics/CreatePartitions answer (a dict, or the response itself): topic name -> (its
    error class name, message)."""
    from kafka.errors import for_code

    if not isinstance(answer, dict):
        answer = answer.to_dict()
    rows = answer.get("topics") or answer.get("results") or []
    return {row["name"]: (for_code(row["error_code"]).__name__, row["error_message"]) for row in rows}


def test_confluent_places_replicas_as_assigned_and_fails_over_in_their_order(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    one, two, three = cluster.node_ids
    # Not the round robin the broker places by itself (partition p on nodes p, p+1, p+2): each one distinguishable.
    assigned = [[three, two, one], [one, three, two], [two, one, three]]
    admin = confluent_admin(cluster)
    admin.create_topics([NewTopic("placed", len(assigned), replica_assignment=assigned)])["placed"].result(10)
    before = placement(cluster, "placed")
    assert before == {
        0: (three, [three, two, one], [one, two, three]),
        1: (one, [one, three, two], [one, two, three]),
        2: (two, [two, one, three], [one, two, three]),
    }

    cluster.stop(three)  # killed: partition 0 goes to the next listed running replica, 2 (not 1, the lowest id)
    try:
        after = placement(cluster, "placed")
        assert after == {
            0: (two, [three, two, one], [one, two]),
            1: (one, [one, three, two], [one, two]),
            2: (two, [two, one, three], [one, two]),
        }
        # A client carries on with partition 0 at its new leader.
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
        delivered: list[Any] = []
        producer.produce("placed", b"after the stop", partition=0, on_delivery=lambda e, m: delivered.append((e, m)))
        producer.flush(15)
        assert [error for error, _ in delivered] == [None]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "placed-reader", "log_level": 0})
        try:
            consumer.assign([TopicPartition("placed", 0, 0)])
            record = None
            for _ in range(30):
                record = consumer.poll(0.5)
                if record is not None:
                    break
            assert record is not None and record.error() is None and record.value() == b"after the stop"
        finally:
            consumer.close()
    finally:
        cluster.start(three)
    # Started again it rejoins the ISR and leads nothing (no preferred-leader election without being asked).
    assert placement(cluster, "placed")[0] == (two, [three, two, one], [one, two, three])


def test_confluent_create_partitions_with_assignments(cluster: Cluster) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    one, two, three = cluster.node_ids
    admin = confluent_admin(cluster)
    admin.create_topics([NewTopic("grown", 1, replica_assignment=[[two, three]])])["grown"].result(timeout=10)
    admin.create_partitions([NewPartitions("grown", 3, replica_assignment=[[three, one], [one, two]])])[
        "grown"
    ].result(timeout=10)
    assert {p: (leader, replicas) for p, (leader, replicas, _isr) in placement(cluster, "grown").items()} == {
        0: (two, [two, three]),
        1: (three, [three, one]),
        2: (one, [one, two]),
    }
    # Three replicas for a topic of two: refused, nothing added.
    future = admin.create_partitions([NewPartitions("grown", 4, replica_assignment=[[one, two, three]])])["grown"]
    with pytest.raises(Exception) as refused:
        future.result(timeout=10)
    error = refused.value.args[0]
    assert error.name() == "INVALID_REPLICA_ASSIGNMENT"
    assert error.str() == (
        "The manual partition assignment includes a partition with 3 replica(s), but this is not consistent with "
        "previous partitions, which have 2 replica(s)."
    )
    assert len(placement(cluster, "grown")) == 3


class _Repeated(dict[int, list[int]]):
    """Assignments naming a partition twice, as kafka-python sends what ``items()`` gives (a dict cannot hold it)."""

    def __init__(self, pairs: list[tuple[int, list[int]]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def items(self) -> Any:
        return self.pairs


def test_kafka_python_validation_errors_and_messages(cluster: Cluster) -> None:
    one, two, three = cluster.node_ids
    unknown = max(cluster.node_ids) + 7
    admin = kafka_python_admin(cluster)
    try:
        answer = admin.create_topics(
            {
                "unknown-broker": {"assignments": {0: [one, unknown]}},
                "twice": {"assignments": {0: [two, two]}},
                "gap": {"assignments": {0: [one], 2: [two]}},
                "partition-twice": {"assignments": _Repeated([(0, [one]), (1, [two]), (1, [three])])},
                "uneven": {"assignments": {0: [one, two], 1: [three]}},
                "empty": {"assignments": {0: []}},
                "counted": {"num_partitions": 2, "assignments": {0: [one]}},
                "replicated": {"replication_factor": 1, "assignments": {0: [one]}},
                "fine": {"assignments": {0: [three], 1: [one]}},
            },
            raise_errors=False,
        )
        results = created(answer)
        assert results == {
            "unknown-broker": (
                "InvalidReplicationAssignmentError",
                f"The manual partition assignment includes broker {unknown}, but no such broker is registered.",
            ),
            "twice": (
                "InvalidReplicationAssignmentError",
                f"The manual partition assignment includes the broker {two} more than once.",
            ),
            "gap": ("InvalidReplicationAssignmentError", "partitions should be a consecutive 0-based integer sequence"),
            "partition-twice": (
                "InvalidReplicationAssignmentError",
                "Found multiple manual partition assignments for partition 1",
            ),
            "uneven": (
                "InvalidReplicationAssignmentError",
                "The manual partition assignment includes a partition with 1 replica(s), but this is not "
                "consistent with previous partitions, which have 2 replica(s).",
            ),
            "empty": (
                "InvalidReplicationAssignmentError",
                "The manual partition assignment includes an empty replica list.",
            ),
            "counted": (
                "InvalidRequestError",
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            ),
            "replicated": (
                "InvalidRequestError",
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            ),
            "fine": ("NoError", None),
        }
        assert {p: (leader, replicas) for p, (leader, replicas, _) in placement(cluster, "fine").items()} == {
            0: (three, [three]),
            1: (one, [one]),
        }
        # validateOnly: checked the same, nothing created.
        checked = created(
            admin.create_topics(
                {"only-checked": {"assignments": {0: [two, one]}}, "only-refused": {"assignments": {0: [unknown]}}},
                validate_only=True,
                raise_errors=False,
            )
        )
        assert checked["only-checked"] == ("NoError", None)
        assert checked["only-refused"][0] == "InvalidReplicationAssignmentError"
        assert "only-checked" not in admin.list_topics()
    finally:
        admin.close()


def test_kafka_python_create_partitions_assignment_checks(cluster: Cluster) -> None:
    from kafka.admin import NewPartitions

    one, two, three = cluster.node_ids
    admin = kafka_python_admin(cluster)
    try:
        assert created(admin.create_topics({"widened": {"assignments": {0: [one]}}}, raise_errors=False)) == {
            "widened": ("NoError", None)
        }
        answer = admin.create_partitions(
            {"widened": NewPartitions(3, [[three], [three]])}, validate_only=True, raise_errors=False
        )
        assert created(answer) == {"widened": ("NoError", None)}
        assert len(placement(cluster, "widened")) == 1  # validateOnly added nothing
        answer = admin.create_partitions({"widened": NewPartitions(2, [[two, three]])}, raise_errors=False)
        assert created(answer)["widened"][0] == "InvalidReplicationAssignmentError"
        answer = admin.create_partitions({"widened": NewPartitions(3, [[three], [two]])}, raise_errors=False)
        assert created(answer) == {"widened": ("NoError", None)}
        assert [replicas for _leader, replicas, _isr in placement(cluster, "widened").values()] == [
            [one], [three], [two],
        ]  # fmt: skip
    finally:
        admin.close()


def test_replicas_all_stopped_are_refused(cluster: Cluster) -> None:
    one, _two, three = cluster.node_ids
    cluster.stop(three)
    try:
        admin = kafka_python_admin(cluster)
        try:
            answer = admin.create_topics(
                {"on-a-stopped-node": {"assignments": {0: [one], 1: [three]}}}, raise_errors=False
            )
        finally:
            admin.close()
    finally:
        cluster.start(three)
    assert created(answer) == {
        "on-a-stopped-node": (
            "InvalidReplicationAssignmentError",
            "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled "
            "shutdown.",
        )
    }


def test_a_placement_survives_a_restart(tmp_path: Path) -> None:
    """The data directory keeps what CreateTopics placed (Kafka's PartitionRecords): after a restart the replicas are
    as assigned, not placed round robin again."""
    from confluent_kafka.admin import NewTopic

    data = tmp_path / "data"
    first = Cluster(tmp_path, "--data-dir", str(data))
    try:
        one, two, three = first.node_ids
        admin = confluent_admin(first)
        admin.create_topics([NewTopic("kept", 2, replica_assignment=[[three, one], [two, three]])])["kept"].result(10)
        admin.create_topics([NewTopic("narrow", 2, replication_factor=1)])["narrow"].result(10)
        before = placement(first, "kept"), placement(first, "narrow")
    finally:
        first.close()
    again = Cluster(tmp_path, "--data-dir", str(data))
    try:
        assert (placement(again, "kept"), placement(again, "narrow")) == before
        assert before[0][0] == (three, [three, one], [one, three])
    finally:
        again.close()
