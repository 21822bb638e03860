"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92): a share group's
start offsets (SPSO) as an admin sees and moves them (docs/spec/share-groups.md sections 2.5, 10.2, 10.3).

Versions: DescribeShareGroupOffsets v0-1 (v1 adds each partition's Lag, KIP-1226), the other two v0; all flexible.
Note DescribeShareGroupOffsets' field order: the group's ErrorCode/ErrorMessage come after its Topics. This broker
reports the live SPSO, which is what Kafka's persister holds after every acknowledgement (section 3.4).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.api.base import (
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    error_message,
    routed_away,
    top_level_error,
)
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema


def describe_share_group_offsets(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, call.api_version)
    group_cls = nested(cls, "DescribeShareGroupOffsetsResponseGroup")
    topic_cls = nested(cls, "DescribeShareGroupOffsetsResponseTopic")
    partition_cls = nested(cls, "DescribeShareGroupOffsetsResponsePartition")

    def log_end(topic_id: Any, partition: int) -> int | None:
        topic = ctx.topics.by_id(topic_id)
        log = None if topic is None else topic.log(partition)
        return None if log is None else log.high_watermark

    groups = []
    for group in body.groups:
        away = routed_away(ctx, group.group_id)
        if away is not None:  # another node's group (issue 29)
            groups.append(
                build(group_cls, group_id=group.group_id, topics=(), error_code=away, error_message=error_message(away))
            )
            continue
        topics = None if group.topics is None else [(t.topic_name, tuple(t.partitions)) for t in group.topics]
        error, message, found = ctx.coordinator.share.describe_offsets(group.group_id, topics, log_end)
        groups.append(
            build(
                group_cls,
                group_id=group.group_id,
                topics=tuple(
                    build(
                        topic_cls,
                        topic_name=name,
                        topic_id=topic_id,
                        partitions=tuple(
                            build(
                                partition_cls,
                                partition_index=i32(o.partition),
                                start_offset=i64(o.start_offset),
                                leader_epoch=i32(o.leader_epoch),
                                lag=i64(o.lag),
                                error_code=o.error,
                                error_message=o.error_message,
                            )
                            for o in offsets
                        ),
                    )
                    for name, topic_id, offsets in found
                ),
                error_code=error,
                error_message=message if message is not None else error_message(error) if error.value else None,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(groups))


def _describe_error(version: int, body: Any, error: ErrorCode) -> Any:
    cls = response_schema(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)
    group_cls = nested(cls, "DescribeShareGroupOffsetsResponseGroup")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        groups=tuple(
            build(group_cls, group_id=g.group_id, topics=(), error_code=error, error_message=error_message(error))
            for g in body.groups
        ),
    )


def alter_share_group_offsets(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.ALTER_SHARE_GROUP_OFFSETS, call.api_version)
    topic_cls = nested(cls, "AlterShareGroupOffsetsResponseTopic")
    partition_cls = nested(cls, "AlterShareGroupOffsetsResponsePartition")
    topics = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in body.topics]
    error, message, found = ctx.coordinator.share.alter_offsets(body.group_id, topics)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        responses=tuple(
            build(
                topic_cls,
                topic_name=name,
                topic_id=topic_id,
                partitions=tuple(
                    build(partition_cls, partition_index=i32(p), error_code=e, error_message=m) for p, e, m in results
                ),
            )
            for name, topic_id, results in found
        ),
    )


def delete_share_group_offsets(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.DELETE_SHARE_GROUP_OFFSETS, call.api_version)
    topic_cls = nested(cls, "DeleteShareGroupOffsetsResponseTopic")
    error, message, found = ctx.coordinator.share.delete_offsets(body.group_id, [t.topic_name for t in body.topics])
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        responses=tuple(
            build(topic_cls, topic_name=name, topic_id=topic_id, error_code=e, error_message=m)
            for name, topic_id, e, m in found
        ),
    )


def _describe_identity(body: Any) -> RequestIdentity:
    return RequestIdentity(body.groups[0].group_id if body.groups else None, None, None, None)


ROUTES = {
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: Route(describe_share_group_offsets, _describe_error, _describe_identity),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: Route(
        alter_share_group_offsets, top_level_error(ApiKey.ALTER_SHARE_GROUP_OFFSETS, responses=())
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: Route(
        delete_share_group_offsets, top_level_error(ApiKey.DELETE_SHARE_GROUP_OFFSETS, responses=())
    ),
}
