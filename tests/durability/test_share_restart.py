"""A share group's partition state across a SIGKILL of a broker with ``--data-dir`` (issue 28; share-groups.md
section 6.1 and 14: what Kafka's share coordinator keeps in ``__share_group_state``), with confluent-kafka's
``ShareConsumer`` on both sides of the kill.

Before the kill a consumer ACCEPTs offsets 0-2, REJECTs 3 and RELEASEs 4 and 5 once (so their delivery count is 1
and they are AVAILABLE again). After the restart a new consumer of the same group must get 4 and 5 only, with
delivery count 2: the acknowledged and archived records stay finished and the delivery counts are remembered. The
same run without ``--data-dir`` starts over (the negative control: offset 0 again, delivery count 1).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.durability.broker_process import BrokerProcess

GROUP = "jobs"
SHARE_FLAGS = ("--topic", "jobs:1", "--group-share-record-lock-duration-ms", "2000",
               "--group-share-min-record-lock-duration-ms", "1000")  # fmt: skip


def prepare(bootstrap: str) -> None:
    """The group starts at the earliest offset, then six records in one batch."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: a collected client cancels it
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(6):
        producer.produce("jobs", value=b"job-%d" % i)
    assert producer.flush(20) == 0


def consume(bootstrap: str, decide: Any, until: Any, timeout: float = 20) -> list[tuple[int, int]]:
    """(offset, delivery count) of every record delivered, each acknowledged as ``decide(offset, count)`` says,
    until ``until(deliveries)`` holds; the acknowledgements are committed before the consumer closes."""
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe(["jobs"])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while not until(seen) and time.monotonic() < deadline:
            for message in consumer.poll(0.5) or []:
                if message.error():
                    continue
                seen.append((message.offset(), message.delivery_count()))
                consumer.acknowledge(message, decide(message.offset(), message.delivery_count()))
            consumer.commit_sync()
    finally:
        consumer.close()
    return seen


def first_run(bootstrap: str) -> list[tuple[int, int]]:
    from confluent_kafka import AcknowledgeType

    def decide(offset: int, count: int) -> Any:
        if offset == 3:
            return AcknowledgeType.REJECT
        return AcknowledgeType.RELEASE if offset >= 4 and count == 1 else AcknowledgeType.ACCEPT

    # Until 4 and 5 were delivered once and released: their second delivery is the later run's to see.
    prepare(bootstrap)
    return consume(bootstrap, decide, lambda seen: {o for o, _ in seen} >= set(range(6)))


def after_restart(bootstrap: str) -> list[tuple[int, int]]:
    from confluent_kafka import AcknowledgeType

    # Watched for longer than the 2 s lock, so a record that should not come back has had the time to.
    started = time.monotonic()
    return consume(bootstrap, lambda offset, count: AcknowledgeType.ACCEPT, lambda seen: time.monotonic() - started > 6)


def group_reset(bootstrap: str) -> str:
    """The group's ``share.auto.offset.reset`` as DescribeConfigs answers it."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, GROUP)
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return str(entries["share.auto.offset.reset"].value)


def run(tmp_path: Path, durable: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    broker = BrokerProcess(tmp_path / "data" if durable else None, *SHARE_FLAGS)
    broker.start()
    try:
        before = first_run(broker.bootstrap)
        broker.kill()
        broker.start()
        if durable:
            assert group_reset(broker.bootstrap) == "earliest"  # the group's config came back from the journal
        else:
            assert group_reset(broker.bootstrap) == "latest"
            prepare(broker.bootstrap)  # the memory-only broker lost the records and the group config too
        return before, after_restart(broker.bootstrap)
    finally:
        broker.stop()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_share_partition_state_survives_a_sigkill(tmp_path: Path) -> None:
    before, after = run(tmp_path, durable=True)
    assert [(o, c) for o, c in before if o < 4] == [(0, 1), (1, 1), (2, 1), (3, 1)], before
    assert sorted(after) == [(4, 2), (5, 2)], (before, after)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_without_a_data_dir_the_share_group_starts_over(tmp_path: Path) -> None:
    _, after = run(tmp_path, durable=False)
    assert sorted(after) == [(o, 1) for o in range(6)], after
