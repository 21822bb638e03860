"""JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13).

Each handler turns the versioned request into the coordinator's message and the
coordinator's result into the versioned response; the rules live in the
coordinator, the version quirks live here.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.base import (
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    millis,
    named_identity,
    top_level_error,
)
from broker.coordinator.messages import JoinRequest, JoinResult, LeavingMember, SyncRequest, SyncResult
from broker.timing.deferred import Deferred
from protocol.apis import ApiKey
from protocol.codec import HandEncoded, build, nested, response_schema
from protocol.group_answers import join_body, sync_body


def join_group(ctx: ApiContext, call: Call, body: Any) -> Deferred[HandEncoded]:
    version = call.api_version
    session_ms = millis(body.session_timeout)
    # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
    rebalance_ms = millis(body.rebalance_timeout) if version >= 1 else session_ms
    request = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=body.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in body.protocols),
        group_instance_id=getattr(body, "group_instance_id", None),
        reason=getattr(body, "reason", None),
        api_version=version,
        client=call.client,
    )
    return ctx.coordinator.join(request).map(partial(join_answer, version))


def _protocol_name(version: int, result: JoinResult) -> str | None:
    if version < 7:
        return result.protocol_name or ""  # not nullable before v7
    return result.protocol_name or None


def join_answer(version: int, result: JoinResult) -> HandEncoded:
    """The handler's answer, encoded by hand when it is sent (protocol/group_answers.py: a formation answers every
    member at least twice)."""
    return HandEncoded(
        partial(
            join_body,
            version,
            result.error,
            result.generation_id,
            result.protocol_type,
            _protocol_name(version, result),
            result.leader,
            result.skip_assignment,
            result.member_id,
            result.members,
        )
    )


def join_response(version: int, result: JoinResult) -> Any:
    """The same answer as kio's dataclass (fault rules answer with it)."""
    cls = response_schema(ApiKey.JOIN_GROUP, version)
    member_cls = nested(cls, "JoinGroupResponseMember")
    protocol_name = _protocol_name(version, result)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=i32(result.generation_id),
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            build(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in result.members
        ),
    )


def sync_group(ctx: ApiContext, call: Call, body: Any) -> Deferred[HandEncoded] | HandEncoded:
    version = call.api_version
    protocol_type = getattr(body, "protocol_type", None)
    protocol_name = getattr(body, "protocol_name", None)
    if version >= 5 and (protocol_type is None or protocol_name is None):
        # KafkaApis rejects these before the coordinator sees them.
        return sync_answer(version, SyncResult(ErrorCode.inconsistent_group_protocol))
    request = SyncRequest(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        assignments=tuple((a.member_id, a.assignment) for a in body.assignments),
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        api_version=version,
    )
    return ctx.coordinator.sync(request).map(partial(sync_answer, version))


def sync_answer(version: int, result: SyncResult) -> HandEncoded:
    """The handler's answer, encoded by hand when it is sent."""
    return HandEncoded(
        partial(sync_body, version, result.error, result.protocol_type, result.protocol_name, result.assignment)
    )


def sync_response(version: int, result: SyncResult) -> Any:
    return build(
        response_schema(ApiKey.SYNC_GROUP, version),
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def heartbeat(ctx: ApiContext, call: Call, body: Any) -> Any:
    error = ctx.coordinator.heartbeat(
        body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
    )
    return build(response_schema(ApiKey.HEARTBEAT, call.api_version), throttle_time=NO_THROTTLE, error_code=error)


def leave_group(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    if version < 3:
        identities = [LeavingMember(body.member_id)]
    else:
        identities = [LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in body.members]
    result = ctx.coordinator.leave(body.group_id, identities)
    cls = response_schema(ApiKey.LEAVE_GROUP, version)
    if version < 3:
        # One member, one top-level error: the request's failure, else the member's.
        error = result.error
        if error is ErrorCode.none and result.members:
            error = result.members[0].error
        return build(cls, throttle_time=NO_THROTTLE, error_code=error)
    member_cls = nested(cls, "MemberResponse")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        members=tuple(
            build(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
            for m in result.members
        ),
    )


def _leave_identity(body: Any) -> RequestIdentity:
    """LeaveGroup v3+ names its members in Members: a rule matches the first one's member and instance id."""
    if not getattr(body, "members", None):
        return named_identity(body)
    first = body.members[0]
    return RequestIdentity(body.group_id, first.member_id or None, first.group_instance_id, None)


ROUTES = {
    ApiKey.JOIN_GROUP: Route(
        join_group,
        lambda version, body, error: join_response(version, JoinResult(error=error, member_id=body.member_id)),
    ),
    ApiKey.SYNC_GROUP: Route(sync_group, lambda version, body, error: sync_response(version, SyncResult(error))),
    ApiKey.HEARTBEAT: Route(heartbeat, top_level_error(ApiKey.HEARTBEAT)),
    ApiKey.LEAVE_GROUP: Route(leave_group, top_level_error(ApiKey.LEAVE_GROUP, members=()), _leave_identity),
}
