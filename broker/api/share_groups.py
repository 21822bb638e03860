"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): KIP-932 share groups.

Versions (docs/spec/share-groups.md sections 2.1, 2.2, 2.7; flexible from v0): both v1 only, as Kafka 4.2 lists them
(v0 existed only in 4.0's early access and is gone from the schemas). librdkafka 2.16 checks that
ShareGroupHeartbeat v1 is listed and otherwise hangs silently (section 12.5). The Assignment of a heartbeat answer
is a nullable struct (marker -1 null = no change, 1 present); a describe's is not nullable. Describe entries come in
request order (one coordinator partition here).
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.authorization import group_denied
from broker.api.base import (
    NO_AUTHORIZED_OPERATIONS,
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    routed_away,
)
from broker.api.groups import ALL_GROUP_OPERATIONS
from broker.coordinator.modern.share.messages import (
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
)
from broker.security.acls import Operation
from protocol.apis import ApiKey
from protocol.codec import HandEncoded, build, nested, response_schema
from protocol.share_answers import share_heartbeat_body


def share_group_heartbeat(ctx: ApiContext, call: Call, body: Any) -> Any:
    request = ShareHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        rack_id=body.rack_id,
        subscribed_topic_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        client=call.client,
    )
    return heartbeat_answer(call.api_version, ctx.coordinator.share.heartbeat(request))


def heartbeat_answer(version: int, result: ShareHeartbeatResult) -> Any:
    """The handler's answer: v1 encoded by hand when it is sent (protocol/share_answers.py: every share consumer
    heartbeats every interval), any other version through kio."""
    if version != 1:
        return heartbeat_response(version, result)
    return HandEncoded(
        partial(
            share_heartbeat_body,
            result.error,
            result.error_message,
            result.member_id,
            result.member_epoch,
            result.heartbeat_interval_ms,
            result.assignment,
        )
    )


def heartbeat_response(version: int, result: ShareHeartbeatResult) -> Any:
    """The same answer as kio's dataclass (fault rules answer with it)."""
    cls = response_schema(ApiKey.SHARE_GROUP_HEARTBEAT, version)
    assignment = None
    if result.assignment is not None:
        topic_cls = nested(cls, "TopicPartitions")
        assignment = build(
            nested(cls, "Assignment"),
            topic_partitions=tuple(
                build(topic_cls, topic_id=topic_id, partitions=tuple(i32(p) for p in partitions))
                for topic_id, partitions in result.assignment
            ),
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )


def share_group_describe(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.SHARE_GROUP_DESCRIBE, call.api_version)
    refused = ShareGroupDescription("", ErrorCode.group_authorization_failed)
    groups = tuple(
        _described(
            cls,
            dataclasses.replace(refused, group_id=group_id)  # issue 30: DESCRIBE on each group
            if group_denied(ctx, call, "ShareGroupDescribe", Operation.DESCRIBE, group_id)
            else ShareGroupDescription(group_id, away)  # another node's group (issue 29)
            if (away := routed_away(ctx, group_id)) is not None
            else ctx.coordinator.share.describe(group_id),
            body.include_authorized_operations,
        )
        for group_id in body.group_ids
    )
    return build(cls, throttle_time=NO_THROTTLE, groups=groups)


def describe_error_response(version: int, group_ids: Any, error: ErrorCode) -> Any:
    cls = response_schema(ApiKey.SHARE_GROUP_DESCRIBE, version)
    groups = tuple(_described(cls, ShareGroupDescription(g, error), False) for g in group_ids)
    return build(cls, throttle_time=NO_THROTTLE, groups=groups)


def _described(cls: type, d: ShareGroupDescription, with_operations: bool) -> Any:
    member_cls = nested(cls, "Member")
    topic_cls = nested(cls, "TopicPartitions")
    return build(
        nested(cls, "DescribedGroup"),
        error_code=d.error,
        error_message=d.error_message,
        group_id=d.group_id,
        group_state=d.state,
        group_epoch=i32(d.group_epoch),
        assignment_epoch=i32(d.assignment_epoch),
        assignor_name=d.assignor_name,
        members=tuple(
            build(
                member_cls,
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=build(
                    nested(cls, "Assignment"),
                    topic_partitions=tuple(
                        build(topic_cls, topic_id=t, topic_name=name, partitions=tuple(i32(p) for p in parts))
                        for t, name, parts in m.assignment
                    ),
                ),
            )
            for m in d.members
        ),
        authorized_operations=ALL_GROUP_OPERATIONS
        if with_operations and d.error is ErrorCode.none
        else NO_AUTHORIZED_OPERATIONS,
    )


def _heartbeat_identity(body: Any) -> RequestIdentity:
    return RequestIdentity(body.group_id, body.member_id, None, None)


def _describe_identity(body: Any) -> RequestIdentity:
    return RequestIdentity(body.group_ids[0] if body.group_ids else None, None, None, None)


ROUTES = {
    ApiKey.SHARE_GROUP_HEARTBEAT: Route(
        share_group_heartbeat,
        lambda version, body, error: heartbeat_response(version, ShareHeartbeatResult(error)),
        _heartbeat_identity,
    ),
    ApiKey.SHARE_GROUP_DESCRIBE: Route(
        share_group_describe,
        lambda version, body, error: describe_error_response(version, body.group_ids, error),
        _describe_identity,
    ),
}
