"""Requests of the share-group APIs (KIP-932) for wire tests: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and
the offsets admin APIs, built with kio at any version; and a broker with short share timings."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.static.primitive import i8, i32, i64

from broker.coordinator.config import GroupConfig
from broker.server.broker import BrokerServer
from protocol.apis import ApiKey
from tests.conftest import broker_settings
from tests.wire.client import WireClient, part, request

HB, DESCRIBE, FETCH, ACK = (
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
)
LOCK_MS = 1000

SHARE_GROUP_CONFIG = GroupConfig(
    initial_rebalance_delay_ms=0,
    min_session_timeout_ms=1000,
    share_record_lock_duration_ms=LOCK_MS,
    share_min_record_lock_duration_ms=LOCK_MS,
    share_heartbeat_interval_ms=1000,
    share_min_heartbeat_interval_ms=1000,
    share_session_timeout_ms=45_000,
)


def share_broker(**group: Any) -> BrokerServer:
    config = GroupConfig(**({f: getattr(SHARE_GROUP_CONFIG, f) for f in SHARE_GROUP_CONFIG.__dataclass_fields__}
                            | group))  # fmt: skip
    return BrokerServer(broker_settings(group=config, topics=(("topic", 3), ("one", 1))))


def heartbeat(
    group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None, rack: str | None = None
) -> Any:
    return request(HB, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                   subscribed_topic_names=topics)  # fmt: skip


Acks = dict[int, list[tuple[int, int, tuple[int, ...]]]]  # partition -> [(first, last, types)]


def _topics(api: int, version: int, topic_id: uuid.UUID, partitions: list[int], acks: Acks | None) -> tuple[Any, ...]:
    name = "FetchPartition" if api == FETCH else "AcknowledgePartition"
    topic_name = "FetchTopic" if api == FETCH else "AcknowledgeTopic"
    wanted = sorted(set(partitions) | set(acks or {}))
    return (
        part(api, version, topic_name, topic_id=topic_id, partitions=tuple(
            part(api, version, name, partition_index=i32(p), acknowledgement_batches=tuple(
                part(api, version, "AcknowledgementBatch", first_offset=i64(f), last_offset=i64(last),
                     acknowledge_types=tuple(i8(t) for t in types))
                for f, last, types in (acks or {}).get(p, [])
            ))
            for p in wanted
        )),
    )  # fmt: skip


def share_fetch(
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    partitions: list[int],
    *,
    acks: Acks | None = None,
    version: int = 1,
    max_records: int = 500,
    batch_size: int = 500,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    acquire_mode: int = 0,
    renew: bool = False,
    max_bytes: int = 0x7FFFFFFF,
    forgotten: list[int] | None = None,
) -> Any:
    return request(
        FETCH, version, group_id=group, member_id=member, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(min_bytes), max_bytes=i32(max_bytes),
        max_records=i32(max_records), batch_size=i32(batch_size), share_acquire_mode=i8(acquire_mode),
        is_renew_ack=renew, topics=_topics(FETCH, version, topic_id, partitions, acks),
        forgotten_topics_data=tuple(
            part(FETCH, version, "ForgottenTopic", topic_id=topic_id, partitions=tuple(i32(p) for p in forgotten))
            for _ in [0] if forgotten
        ),
    )  # fmt: skip


def share_acknowledge(
    group: str, member: str, epoch: int, topic_id: uuid.UUID, acks: Acks, *, version: int = 1, renew: bool = False
) -> Any:
    return request(ACK, version, group_id=group, member_id=member, share_session_epoch=i32(epoch),
                   is_renew_ack=renew, topics=_topics(ACK, version, topic_id, [], acks))  # fmt: skip


def acquired(answer: Any, partition: int = 0) -> list[tuple[int, int, int]]:
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for t in answer.responses
        for p in t.partitions
        if p.partition_index == partition
        for r in p.acquired_records
    ]


def partition_of(answer: Any, partition: int = 0) -> Any:
    found = [p for t in answer.responses for p in t.partitions if p.partition_index == partition]
    assert len(found) == 1, answer
    return found[0]


def offsets_of(answer: Any, partition: int = 0) -> list[int]:
    return [o for first, last, _ in acquired(answer, partition) for o in range(first, last + 1)]


async def set_group_config(client: WireClient, group: str, **configs: str) -> Any:
    """IncrementalAlterConfigs SET on a GROUP resource (type 32)."""
    api = ApiKey.INCREMENTAL_ALTER_CONFIGS
    return await client.call(request(api, 1, resources=(
        part(api, 1, "AlterConfigsResource", resource_type=i8(32), resource_name=group, configs=tuple(
            part(api, 1, "AlterableConfig", name=name.replace("_", "."), config_operation=i8(0), value=value)
            for name, value in configs.items()
        )),
    ), validate_only=False))  # fmt: skip


DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)


def share_describe(*group_ids: str, operations: bool = False) -> Any:
    return request(DESCRIBE, 1, group_ids=group_ids, include_authorized_operations=operations)


def describe_offsets(group: str, topics: dict[str, list[int]] | None, *, version: int = 1) -> Any:
    """DescribeShareGroupOffsets of one group; ``topics`` None asks for every initialised partition."""
    return request(DESCRIBE_OFFSETS, version, groups=(
        part(DESCRIBE_OFFSETS, version, "DescribeShareGroupOffsetsRequestGroup", group_id=group, topics=None
             if topics is None else tuple(
                 part(DESCRIBE_OFFSETS, version, "DescribeShareGroupOffsetsRequestTopic", topic_name=name,
                      partitions=tuple(i32(p) for p in partitions))
                 for name, partitions in topics.items()
             )),
    ))  # fmt: skip


def alter_offsets(group: str, topics: dict[str, dict[int, int]]) -> Any:
    """AlterShareGroupOffsets v0: topic -> partition -> new start offset."""
    return request(ALTER_OFFSETS, 0, group_id=group, topics=tuple(
        part(ALTER_OFFSETS, 0, "AlterShareGroupOffsetsRequestTopic", topic_name=name, partitions=tuple(
            part(ALTER_OFFSETS, 0, "AlterShareGroupOffsetsRequestPartition", partition_index=i32(p),
                 start_offset=i64(offset))
            for p, offset in partitions.items()
        ))
        for name, partitions in topics.items()
    ))  # fmt: skip


def delete_offsets(group: str, *topics: str) -> Any:
    return request(DELETE_OFFSETS, 0, group_id=group, topics=tuple(
        part(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=name) for name in topics
    ))  # fmt: skip


def offsets_by_partition(answer: Any, topic: str) -> dict[int, tuple[int, int | None, Any]]:
    """A DescribeShareGroupOffsets answer's (start offset, lag or None in v0, error) of ``topic`` by partition."""
    (group,) = answer.groups
    (found,) = [t for t in group.topics if t.topic_name == topic]
    return {p.partition_index: (p.start_offset, getattr(p, "lag", None), p.error_code) for p in found.partitions}
