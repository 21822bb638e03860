"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 consumer groups.

Versions (docs/spec/consumer-groups.md sections 2.1, 2.2; both flexible from v0):
* ConsumerGroupHeartbeat v0-1. v1 adds SubscribedTopicRegex and makes the client generate its member id (KIP-1082:
  the coordinator checks that, it needs ``api_version``). The response is the same in both versions. Assignment
  null means "no change"; present with no partitions means "you own nothing" (section 2.1, 4.14): the marker byte
  (-1 null, 1 present) is kio's.
* ConsumerGroupDescribe v0-1. v1 adds each member's MemberType (-1 unknown, 0 classic protocol, 1 consumer protocol).

Both answer UNSUPPORTED_VERSION with a null ErrorMessage when the consumer protocol is off (``consumer`` not in
``group.coordinator.rebalance.protocols``), before the coordinator sees them (section 4.1 item 1, KafkaApis
``isConsumerGroupProtocolEnabled``); ApiVersions still lists them (section 2.4). Describe entries come in request
order: Kafka orders them by coordinator partition, and this broker has one (section 9.3; clients match by GroupId).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from broker.api.authorization import denied_topics
from broker.api.base import (
    NO_AUTHORIZED_OPERATIONS,
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    millis,
    routed_away,
)
from broker.api.groups import ALL_GROUP_OPERATIONS
from broker.coordinator.messages import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult,
    DescribedTopicPartitions,
)
from broker.security.acls import Operation, ResourceType
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

# kio reads the all-zero Uuid (Kafka's Uuid.ZERO_UUID, "no id") as None; the coordinator gets it back as a Uuid, which
# matches no topic (Kafka never issues it: section 3.6).
_ZERO_UUID = uuid.UUID(int=0)


def consumer_group_heartbeat(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    if not ctx.coordinator.config.consumer_protocol_enabled:
        return heartbeat_response(version, ConsumerHeartbeatResult(ErrorCode.unsupported_version))
    owned = body.topic_partitions
    request = ConsumerHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=millis(body.rebalance_timeout),
        subscribed_topic_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),  # v1+; v0 cannot change it
        server_assignor=body.server_assignor,
        topic_partitions=None
        if owned is None
        else tuple((t.topic_id or _ZERO_UUID, tuple(t.partitions)) for t in owned),
        api_version=version,
        client=call.client,
        describable=None if ctx.authorizer is None else partial(_describable, ctx, call),
    )
    return heartbeat_response(version, ctx.coordinator.consumer_heartbeat(request))


def _describable(ctx: ApiContext, call: Call, topic: str) -> bool:
    """Issue 30: a topic the member's regex may resolve to (DESCRIBE; a drop is silent, as in Kafka 4.0)."""
    assert ctx.authorizer is not None
    return ctx.authorizer.authorize(
        call.client, "ConsumerGroupHeartbeat", Operation.DESCRIBE, ResourceType.TOPIC, topic, report=False
    )


def heartbeat_response(version: int, result: ConsumerHeartbeatResult) -> Any:
    """The versioned response of a result, for the handler and a fault rule's error alike (section 4.14, 4.15)."""
    cls = response_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
    assignment = None
    if result.assignment is not None:
        topic_cls = nested(cls, "TopicPartitions")
        assignment = build(
            nested(cls, "Assignment"),
            topic_partitions=tuple(
                build(topic_cls, topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(partitions)))
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


def consumer_group_describe(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    if not ctx.coordinator.config.consumer_protocol_enabled:
        return describe_error_response(version, body.group_ids, ErrorCode.unsupported_version)
    cls = response_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
    with_operations = body.include_authorized_operations
    authorizer = ctx.authorizer  # issue 30: DESCRIBE on each group, 30 in its entry (spec 10)
    groups = []
    for group_id in body.group_ids:
        operations = ALL_GROUP_OPERATIONS
        if authorizer is not None:
            if not authorizer.authorize(
                call.client, "ConsumerGroupDescribe", Operation.DESCRIBE, ResourceType.GROUP, group_id
            ):
                refused = ConsumerGroupDescription(group_id, ErrorCode.group_authorization_failed)
                groups.append(_described_group(cls, refused, with_operations=False))
                continue
            operations = i32(authorizer.authorized_operations(call.client, ResourceType.GROUP, group_id))
        described = (
            ConsumerGroupDescription(group_id, away)  # another node's group (issue 29)
            if (away := routed_away(ctx, group_id)) is not None
            else ctx.coordinator.describe_consumer_group(group_id)
        )
        if authorizer is not None and _hides_topics(ctx, call, described):
            described = ConsumerGroupDescription(group_id, ErrorCode.topic_authorization_failed, _UNDESCRIBABLE)
        groups.append(_described_group(cls, described, with_operations, operations))
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(groups))


_UNDESCRIBABLE = "The group has described topic(s) that the client is not authorized to describe."


def _hides_topics(ctx: ApiContext, call: Call, described: ConsumerGroupDescription) -> bool:
    """Kafka 4.0: a group any of whose members is assigned (or targeted at) a topic the client may not DESCRIBE is
    not described (KafkaApis.handleConsumerGroupDescribe)."""
    names = {t.topic_name for m in described.members for t in (*m.assignment, *m.target_assignment)}
    return bool(names) and bool(denied_topics(ctx, call, "ConsumerGroupDescribe", Operation.DESCRIBE, sorted(names)))


def describe_error_response(version: int, group_ids: Iterable[str], error: ErrorCode) -> Any:
    """Every requested group answered ``error`` and nothing else (ConsumerGroupDescribeRequest.getErrorResponse)."""
    cls = response_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
    groups = tuple(
        _described_group(cls, ConsumerGroupDescription(group_id, error), with_operations=False)
        for group_id in group_ids
    )
    return build(cls, throttle_time=NO_THROTTLE, groups=groups)


def _described_group(
    cls: type, d: ConsumerGroupDescription, with_operations: bool, operations: i32 = ALL_GROUP_OPERATIONS
) -> Any:
    member_cls = nested(cls, "Member")
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
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=i32(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(cls, m.assignment),
                target_assignment=_assignment(cls, m.target_assignment),
                member_type=i8(m.member_type),  # v1+ only: ``build`` leaves it out of v0
            )
            for m in d.members
        ),
        # Only for a described group, and only when asked (docs/spec/group-coordinator.md 14.1, section 9.3).
        authorized_operations=operations if with_operations and d.error is ErrorCode.none else NO_AUTHORIZED_OPERATIONS,
    )


def _assignment(cls: type, topics: tuple[DescribedTopicPartitions, ...]) -> Any:
    """Not nullable in ConsumerGroupDescribe (no marker byte, section 2.2): an empty one is an empty array."""
    topic_cls = nested(cls, "TopicPartitions")
    return build(
        nested(cls, "Assignment"),
        topic_partitions=tuple(
            build(
                topic_cls,
                topic_id=t.topic_id,
                topic_name=t.topic_name,
                partitions=tuple(i32(p) for p in sorted(t.partitions)),
            )
            for t in topics
        ),
    )


def _heartbeat_identity(body: Any) -> RequestIdentity:
    # Its field is InstanceId, and null there means "unchanged" (section 2.1): a rule on an instance id matches the
    # heartbeats that carry it (the joining ones), not the ones that leave it out.
    return RequestIdentity(body.group_id, body.member_id, body.instance_id, None)


def _describe_identity(body: Any) -> RequestIdentity:
    """A rule on a group matches a describe whose first requested group it is."""
    return RequestIdentity(body.group_ids[0] if body.group_ids else None, None, None, None)


ROUTES = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Route(
        consumer_group_heartbeat,
        # ErrorMessage and MemberId null, epoch and interval 0, Assignment null (section 4.1).
        lambda version, body, error: heartbeat_response(version, ConsumerHeartbeatResult(error)),
        _heartbeat_identity,
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: Route(
        consumer_group_describe,
        lambda version, body, error: describe_error_response(version, body.group_ids, error),
        _describe_identity,
    ),
}
