"""OffsetForLeaderEpoch (23): where a leader epoch ends, from the partition leader's epoch cache.

Consumers send it after a leader change (KIP-320) with the epoch of the last record they fetched, to learn
whether their position is still in the log; an UNDEFINED answer reads as "truncated, divergence unknown" and
kafka-python then resets the position by auto.offset.reset (cluster-and-durability.md 4.4). So on several nodes the
answer comes from the layout's epoch cache, whose entry for a new epoch is recorded at election, before any
record (Partition.makeLeader), and is never UNDEFINED for an epoch the partition had. One node has one epoch, 0,
from offset 0: the same cache with a single entry.

Partition.lastOffsetForLeaderEpoch: the current leader epoch is checked first (checkCurrentLeaderEpoch), then a
consumer's request (replica id -1) must reach the leader (NOT_LEADER_OR_FOLLOWER), then
LeaderEpochFileCache.endOffsetFor answers, the current epoch ending at the log end offset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.api.authorization import denied_topics
from broker.api.base import NO_THROTTLE, ApiContext, Call, Route
from broker.api.fetch import leader_epoch_error
from broker.security.acls import Operation
from broker.storage.partition_log import LEADER_EPOCH
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

_UNDEFINED = (-1, -1)  # UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


def offset_for_leader_epoch(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, call.api_version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    route = ctx.route
    # Issue 30: DESCRIBE on each topic, 29 on its partitions (spec 10).
    denied = denied_topics(ctx, call, "OffsetForLeaderEpoch", Operation.DESCRIBE, (t.topic for t in body.topics))

    def answer(name: str, p: Any) -> Any:
        topic = ctx.topics.get(name) if name not in denied else None
        log = topic.log(p.partition) if topic is not None else None
        epoch, end_offset = _UNDEFINED
        if name in denied:
            error: ErrorCode | None = ErrorCode.topic_authorization_failed
        elif log is None:
            error = ErrorCode.unknown_topic_or_partition
        elif route is None:
            error = leader_epoch_error(p.current_leader_epoch)
            if error is None and p.leader_epoch == LEADER_EPOCH:  # any other is -1 or above every entry
                epoch, end_offset = LEADER_EPOCH, log.next_offset
        else:
            error = route.partition_error(name, p.partition, p.current_leader_epoch)
            if error is None:
                epoch, end_offset = route.layout.end_offset_for(name, p.partition, p.leader_epoch)
        return build(
            partition_cls,
            error_code=error or ErrorCode.none,
            partition=p.partition,
            leader_epoch=i32(epoch),
            end_offset=i64(end_offset),
        )

    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(topic_cls, topic=t.topic, partitions=tuple(answer(t.topic, p) for p in t.partitions))
            for t in body.topics
        ),
    )


def _offset_for_leader_epoch_error(version: int, body: Any, error: ErrorCode) -> Any:
    """OffsetsForLeaderEpochRequest.getErrorResponse: every requested partition, epoch and offset undefined."""
    cls = response_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_cls,
                topic=t.topic,
                partitions=tuple(
                    build(partition_cls, error_code=error, partition=p.partition, leader_epoch=i32(-1),
                          end_offset=i64(-1))
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )  # fmt: skip


ROUTES = {ApiKey.OFFSET_FOR_LEADER_EPOCH: Route(offset_for_leader_epoch, _offset_for_leader_epoch_error)}
