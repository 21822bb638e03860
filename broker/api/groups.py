"""DescribeGroups (15), ListGroups (16) and DeleteGroups (42).

DescribeGroups describes classic groups only (docs/spec/group-coordinator.md 14.1, docs/spec/consumer-groups.md
section 9.2). v0-5: an unknown group, or one of another type (a KIP-848 consumer group), is ErrorCode NONE with
state Dead and nothing else. v6 (KIP-1043, Kafka 4.0) answers the same entry with GROUP_ID_NOT_FOUND and an
ErrorMessage: "Group X not found." or "Group X is not a classic group." (GroupMetadataManager.describeGroups).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.base import (
    NO_AUTHORIZED_OPERATIONS,
    NO_THROTTLE,
    ApiContext,
    Call,
    RequestIdentity,
    Route,
    routed_away,
    top_level_error,
)
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import GroupDescription
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

# With no authorizer Kafka 4.x reports READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
ALL_GROUP_OPERATIONS = i32(sum(1 << op for op in (3, 6, 8, 10, 11)))
# The first DescribeGroups version that answers GROUP_ID_NOT_FOUND for a group it does not describe.
_NOT_FOUND_VERSION = 6


def describe_groups(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.DESCRIBE_GROUPS, call.api_version)
    group_cls = nested(cls, "DescribedGroup")
    member_cls = nested(cls, "DescribedGroupMember")
    with_operations = getattr(body, "include_authorized_operations", False)
    authorizer = ctx.authorizer  # issue 30: DESCRIBE on each group, 30 in its entry (spec 10)
    described = []
    for group_id in body.groups:
        if authorizer is not None and not authorizer.authorize(
            call.client, "DescribeGroups", Operation.DESCRIBE, ResourceType.GROUP, group_id
        ):
            described.append(_group_error(group_cls, group_id, ErrorCode.group_authorization_failed))
            continue
        away = routed_away(ctx, group_id)
        if away is not None:  # another node's group (issue 29): its entry as DescribeGroupsResponse.groupError
            described.append(_group_error(group_cls, group_id, away))
            continue
        missing: str | None  # what v6 says of a group it does not describe
        if ctx.coordinator.group_type(group_id) not in (None, GroupType.CLASSIC):
            # Not a classic group: described as an unknown one (section 9.2), whatever the classic side holds.
            d = GroupDescription(group_id)
            missing = f"Group {group_id} is not a classic group."
        else:
            d = ctx.coordinator.describe(group_id)
            # An unknown group comes back as NONE and Dead (a live group is never Dead: admin.describe).
            missing = f"Group {group_id} not found." if d.error is ErrorCode.none and d.state == "Dead" else None
        error, message = d.error, None
        if missing is not None and call.api_version >= _NOT_FOUND_VERSION:
            error, message = ErrorCode.group_id_not_found, missing
        operations = NO_AUTHORIZED_OPERATIONS
        if with_operations and error is ErrorCode.none:
            operations = ALL_GROUP_OPERATIONS
            if authorizer is not None:
                operations = i32(authorizer.authorized_operations(call.client, ResourceType.GROUP, group_id))
        described.append(
            build(
                group_cls,
                error_code=error,
                error_message=message,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ),
                authorized_operations=operations,
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, groups=tuple(described))


def list_groups(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.LIST_GROUPS, call.api_version)
    group_cls = nested(cls, "ListedGroup")
    error, groups = ctx.coordinator.list_groups(getattr(body, "states_filter", ()), getattr(body, "types_filter", ()))
    route = ctx.route
    if route is not None and error is ErrorCode.none:
        # Each node lists the groups it coordinates (an admin client asks every node and merges); one of its
        # partitions still loading fails the listing, as GroupCoordinatorService.listGroups does.
        if route.loading_groups():
            error, groups = ErrorCode.coordinator_load_in_progress, ()
        else:
            groups = tuple(g for g in groups if route.coordinates_group(g.group_id))
    authorizer = ctx.authorizer
    if authorizer is not None and not authorizer.authorize(
        call.client, "ListGroups", Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, report=False
    ):
        # Without DESCRIBE on the cluster, only the groups the client may DESCRIBE; no error (spec 10).
        groups = tuple(
            g
            for g in groups
            if authorizer.authorize(
                call.client, "ListGroups", Operation.DESCRIBE, ResourceType.GROUP, g.group_id, report=False
            )
        )
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error,
        groups=tuple(
            build(
                group_cls,
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in groups
        ),
    )


def delete_groups(ctx: ApiContext, call: Call, body: Any) -> Any:
    cls = response_schema(ApiKey.DELETE_GROUPS, call.api_version)
    result_cls = nested(cls, "DeletableGroupResult")
    names = body.groups_names
    away = {g: e for g in names if (e := routed_away(ctx, g)) is not None}
    authorizer = ctx.authorizer  # issue 30: DELETE on each group, 30 in its result (spec 10)
    if authorizer is not None:
        for g in names:
            if not authorizer.authorize(call.client, "DeleteGroups", Operation.DELETE, ResourceType.GROUP, g):
                away[g] = ErrorCode.group_authorization_failed
    if away:  # another node's groups (issue 29) answer NOT_COORDINATOR each, the rest are deleted
        deleted = dict(ctx.coordinator.delete_groups(g for g in names if g not in away))
        results = tuple((g, away[g] if g in away else deleted[g]) for g in dict.fromkeys(names))
    else:
        results = ctx.coordinator.delete_groups(names)
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(build(result_cls, group_id=g, error_code=e) for g, e in results),
    )


def _describe_groups_error(version: int, body: Any, error: ErrorCode) -> Any:
    """DescribeGroupsRequest.getErrorResponse: every requested group as DescribeGroupsResponse.groupError builds it
    (unknown state, protocol type and protocol all "", no members, authorized operations omitted)."""
    cls = response_schema(ApiKey.DESCRIBE_GROUPS, version)
    group_cls = nested(cls, "DescribedGroup")
    groups = tuple(_group_error(group_cls, group_id, error) for group_id in body.groups)
    return build(cls, throttle_time=NO_THROTTLE, groups=groups)


def _group_error(group_cls: type, group_id: str, error: ErrorCode) -> Any:
    return build(
        group_cls,
        error_code=error,
        error_message=None,
        group_id=group_id,
        group_state="",
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


def _delete_groups_error(version: int, body: Any, error: ErrorCode) -> Any:
    # DeleteGroupsRequest.getErrorResponse: every requested group gets the error.
    cls = response_schema(ApiKey.DELETE_GROUPS, version)
    result_cls = nested(cls, "DeletableGroupResult")
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        results=tuple(build(result_cls, group_id=g, error_code=error) for g in body.groups_names),
    )


def _first_group(names: Any) -> RequestIdentity:
    """A rule on a group matches a request whose first named group it is."""
    return RequestIdentity(names[0] if names else None, None, None, None)


ROUTES = {
    ApiKey.DESCRIBE_GROUPS: Route(describe_groups, _describe_groups_error, lambda body: _first_group(body.groups)),
    # ListGroupsRequest.getErrorResponse: the top-level error and no groups.
    ApiKey.LIST_GROUPS: Route(list_groups, top_level_error(ApiKey.LIST_GROUPS, groups=())),
    ApiKey.DELETE_GROUPS: Route(delete_groups, _delete_groups_error, lambda body: _first_group(body.groups_names)),
}
