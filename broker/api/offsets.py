"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from broker.api.authorization import NOTHING, denied_topics, group_denied
from broker.api.base import (
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    millis,
    named_identity,
    partition_errors,
    routed_away,
    top_level_error,
)
from broker.coordinator.messages import (
    CommitRequest,
    FetchedOffset,
    GroupOffsets,
    PartitionCommit,
    PartitionErrors,
    every_partition,
)
from broker.security.acls import Operation
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema


def _exists(ctx: ApiContext, topic: str, partition: int) -> bool:
    found = ctx.topics.get(topic)
    return found is not None and 0 <= partition < found.partitions


def known_commits(ctx: ApiContext, topics: Any) -> tuple[tuple[str, tuple[PartitionCommit, ...]], ...]:
    """The commits of partitions that exist, per topic (OffsetCommit and TxnOffsetCommit alike): KafkaApis answers
    the others UNKNOWN_TOPIC_OR_PARTITION itself and drops them from what the coordinator sees."""
    return tuple(
        (
            topic.name,
            tuple(
                PartitionCommit(
                    partition=p.partition_index,
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=p.committed_metadata,
                )
                for p in topic.partitions
                if _exists(ctx, topic.name, p.partition_index)
            ),
        )
        for topic in topics
    )


def _with_unknown_partitions(body: Any, result: PartitionErrors) -> PartitionErrors:
    """The coordinator's answer plus UNKNOWN_TOPIC_OR_PARTITION for what KafkaApis filtered out, in request order."""
    errors = {(topic, partition): error for topic, partitions in result for partition, error in partitions}
    return tuple(
        (
            t.name,
            tuple(
                (p.partition_index, errors.get((t.name, p.partition_index), ErrorCode.unknown_topic_or_partition))
                for p in t.partitions
            ),
        )
        for t in body.topics
    )


def offset_commit(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    retention = getattr(body, "retention_time", None)
    # KafkaApis answers partitions missing from the metadata itself and drops them from the request;
    # when none is left the group is not looked at (spec 6.1).
    # Issue 30: READ on each topic (the group's READ was the authorization gate's); 29 for a denied one's partitions.
    denied = (
        NOTHING
        if ctx.authorizer is None
        else denied_topics(ctx, call, "OffsetCommit", Operation.READ, (t.name for t in body.topics))
    )
    known = known_commits(ctx, (t for t in body.topics if t.name not in denied))
    request = CommitRequest(
        group_id=body.group_id,
        topics=tuple((name, partitions) for name, partitions in known if partitions),
        generation_id=body.generation_id_or_member_epoch,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        retention_time_ms=millis(retention) if retention is not None else -1,
        api_version=version,
    )
    result = ctx.coordinator.commit_offsets(request) if request.topics else ()
    result = _with_unknown_partitions(body, result)
    if denied:
        refused = ErrorCode.topic_authorization_failed
        result = tuple((t, tuple((p, refused if t in denied else e) for p, e in ps)) for t, ps in result)
    cls = response_schema(ApiKey.OFFSET_COMMIT, version)
    return build(cls, throttle_time=NO_THROTTLE, topics=partition_errors(cls, "OffsetCommitResponse", result))


def offset_fetch(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.OFFSET_FETCH, version)
    require_stable = getattr(body, "require_stable", False)
    coordinator = ctx.coordinator
    if version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        topic_cls = nested(cls, "OffsetFetchResponseTopics")
        partition_cls = nested(cls, "OffsetFetchResponsePartitions")
        groups = []
        for group in body.groups:
            if group_denied(ctx, call, "OffsetFetch", Operation.DESCRIBE, group.group_id):
                refused = ErrorCode.group_authorization_failed
                groups.append(build(group_cls, group_id=group.group_id, topics=(), error_code=refused))
                continue
            away = routed_away(ctx, group.group_id)
            if away is not None:  # another node's group (issue 29): a group-level error, no topics
                groups.append(build(group_cls, group_id=group.group_id, topics=(), error_code=away))
                continue
            wanted = _wanted(group.topics)
            # v9 names the member (section 8.2 of docs/spec/consumer-groups.md); older versions never do.
            offsets = coordinator.fetch_offsets(
                group.group_id,
                wanted,
                require_stable,
                getattr(group, "member_id", None),
                getattr(group, "member_epoch", -1),
            )
            offsets = _hide_denied(ctx, call, offsets, wanted is not None)
            groups.append(
                build(
                    group_cls,
                    group_id=group.group_id,
                    topics=_topics(topic_cls, partition_cls, offsets),
                    error_code=offsets.error,
                )
            )
        return build(cls, throttle_time=NO_THROTTLE, groups=tuple(groups))

    topic_cls = nested(cls, "OffsetFetchResponseTopic")
    partition_cls = nested(cls, "OffsetFetchResponsePartition")
    wanted = _wanted(body.topics)
    if group_denied(ctx, call, "OffsetFetch", Operation.DESCRIBE, body.group_id):
        return _offset_fetch_error(version, body, ErrorCode.group_authorization_failed)
    offsets = coordinator.fetch_offsets(body.group_id, wanted, require_stable)
    offsets = _hide_denied(ctx, call, offsets, wanted is not None)
    if version < 2 and offsets.error is not ErrorCode.none:
        # v0-1 have no group-level error: it goes on every requested partition.
        offsets = GroupOffsets(
            offsets.group_id,
            offsets.error,
            tuple((name, tuple(FetchedOffset(p, error=offsets.error) for p in ps)) for name, ps in wanted or ()),
        )
    topics = _topics(topic_cls, partition_cls, offsets)
    return build(cls, throttle_time=NO_THROTTLE, topics=topics, error_code=offsets.error)


def _hide_denied(ctx: ApiContext, call: Call, offsets: GroupOffsets, requested: bool) -> GroupOffsets:
    """Issue 30: DESCRIBE on each topic. A requested one denied: 29 and offset -1 on its partitions; a fetch of
    everything leaves it out, silently (KafkaApis.handleOffsetFetchRequest)."""
    if ctx.authorizer is None:
        return offsets
    denied = denied_topics(ctx, call, "OffsetFetch", Operation.DESCRIBE, (name for name, _ in offsets.topics))
    if not denied:
        return offsets
    refused = ErrorCode.topic_authorization_failed
    if requested:
        topics = tuple(
            (name, tuple(FetchedOffset(o.partition, error=refused) for o in fetched) if name in denied else fetched)
            for name, fetched in offsets.topics
        )
    else:
        topics = tuple((name, fetched) for name, fetched in offsets.topics if name not in denied)
    return GroupOffsets(offsets.group_id, offsets.error, topics)


def _wanted(topics: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    if topics is None:
        return None
    return [(t.name, tuple(t.partition_indexes)) for t in topics]


def _topics(topic_cls: type, partition_cls: type, offsets: GroupOffsets) -> tuple[Any, ...]:
    return tuple(
        build(
            topic_cls,
            name=name,
            partitions=tuple(
                build(
                    partition_cls,
                    partition_index=i32(o.partition),
                    committed_offset=i64(o.offset),
                    committed_leader_epoch=i32(o.leader_epoch),
                    metadata=o.metadata,
                    error_code=o.error,
                )
                for o in fetched
            ),
        )
        for name, fetched in offsets.topics
    )


def offset_delete(ctx: ApiContext, call: Call, body: Any) -> Any:
    # As for OffsetCommit, partitions missing from the metadata are answered here; group errors still win.
    # Issue 30: READ on each topic, 29 on its partitions (the group's DELETE was the authorization gate's).
    denied = denied_topics(ctx, call, "OffsetDelete", Operation.READ, (t.name for t in body.topics))
    wanted = [
        (t.name, tuple(p.partition_index for p in t.partitions if _exists(ctx, t.name, p.partition_index)))
        for t in body.topics
        if t.name not in denied
    ]
    result = ctx.coordinator.delete_offsets(body.group_id, [(name, ps) for name, ps in wanted if ps])
    topics = _with_unknown_partitions(body, result.topics) if result.error is ErrorCode.none else ()
    if denied and topics:
        refused = ErrorCode.topic_authorization_failed
        topics = tuple((t, tuple((p, refused if t in denied else e) for p, e in ps)) for t, ps in topics)
    cls = response_schema(ApiKey.OFFSET_DELETE, call.api_version)
    return build(
        cls,
        error_code=result.error,
        throttle_time=NO_THROTTLE,
        topics=partition_errors(cls, "OffsetDeleteResponse", topics),
    )


def _offset_commit_error(version: int, body: Any, error: ErrorCode) -> Any:
    # OffsetCommitRequest.getErrorResponse: no top-level error, so it goes on every requested partition.
    cls = response_schema(ApiKey.OFFSET_COMMIT, version)
    refused = every_partition(((t.name, (p.partition_index for p in t.partitions)) for t in body.topics), error)
    return build(cls, throttle_time=NO_THROTTLE, topics=partition_errors(cls, "OffsetCommitResponse", refused))


def _offset_fetch_error(version: int, body: Any, error: ErrorCode) -> Any:
    """OffsetFetchRequest.getErrorResponse: v8+ on every requested group, v2-7 top level, v1 (no group-level
    error) on every requested partition, with no offset and no metadata."""
    cls = response_schema(ApiKey.OFFSET_FETCH, version)
    if version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        groups = tuple(build(group_cls, group_id=g.group_id, topics=(), error_code=error) for g in body.groups)
        return build(cls, throttle_time=NO_THROTTLE, groups=groups)
    if version >= 2:
        return build(cls, throttle_time=NO_THROTTLE, topics=(), error_code=error)
    offsets = GroupOffsets(
        body.group_id,
        error,
        tuple((t.name, tuple(FetchedOffset(p, error=error) for p in t.partition_indexes)) for t in body.topics or ()),
    )
    topics = _topics(nested(cls, "OffsetFetchResponseTopic"), nested(cls, "OffsetFetchResponsePartition"), offsets)
    return build(cls, throttle_time=NO_THROTTLE, topics=topics)


def _offset_fetch_identity(body: Any) -> RequestIdentity:
    """OffsetFetch v8+ names its groups in Groups: a rule matches the first one's group and member (v9)."""
    if not getattr(body, "groups", None):
        return named_identity(body)
    first = body.groups[0]
    return RequestIdentity(first.group_id, getattr(first, "member_id", None), None, None)


ROUTES = {
    ApiKey.OFFSET_COMMIT: Route(offset_commit, _offset_commit_error),
    ApiKey.OFFSET_FETCH: Route(offset_fetch, _offset_fetch_error, _offset_fetch_identity),
    # OffsetDeleteRequest.getErrorResponse: the top-level error, no topics.
    ApiKey.OFFSET_DELETE: Route(offset_delete, top_level_error(ApiKey.OFFSET_DELETE, topics=())),
}
