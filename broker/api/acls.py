"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), valid 1-3 (KIP-896 removed v0; flexible 2+): Kafka's
``AclApis`` over the broker's authorizer (docs/spec/security.md 11).

Without an authorizer every one is answered SECURITY_DISABLED, as ``AclApis`` does without one (the texts differ
on purpose: DescribeAcls says "No Authorizer is configured on the broker", Create and Delete "No Authorizer is
configured."). With one, the cluster checks (DESCRIBE / ALTER) come first, in the authorization gate
(broker/server/acl_gate.py); here: filters and bindings are validated (INVALID_REQUEST for the one refused, the
others go on), and changes apply before the answer (no metadata-log propagation delay: a deviation on purpose).
"""

from __future__ import annotations

from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from broker.api.base import NO_THROTTLE, ApiContext, Call, Route, error_message
from broker.security.acls import (
    AccessEntry,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    binding_error,
)
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

DESCRIBE_ACLS_DISABLED = "No Authorizer is configured on the broker"
ALTER_ACLS_DISABLED = "No Authorizer is configured."


_Code = TypeVar("_Code", ResourceType, PatternType, Operation, Permission)


def _code(kind: type[_Code], value: int) -> _Code:
    """A wire code as its enum; a code Kafka does not know is UNKNOWN (0), which every validation refuses."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


def _filter(version: int, body: Any) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter (the same fields) as an AclFilter."""
    resource_type = _code(ResourceType, body.resource_type_filter)
    if resource_type is ResourceType.USER and version < 3:
        resource_type = ResourceType.UNKNOWN  # USER is v3's
    return AclFilter(
        resource_type,
        body.resource_name_filter,
        _code(PatternType, body.pattern_type_filter),
        body.principal_filter,
        body.host_filter,
        _code(Operation, body.operation),
        _code(Permission, body.permission_type),
    )


def describe_acls(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    authorizer = ctx.authorizer
    if authorizer is None:
        return _describe_acls_error(version, body, ErrorCode.security_disabled, DESCRIBE_ACLS_DISABLED)
    acl_filter = _filter(version, body)
    refused = acl_filter.error()
    if refused is not None:
        return _describe_acls_error(version, body, ErrorCode.invalid_request, refused)
    cls = response_schema(ApiKey.DESCRIBE_ACLS, version)
    resource_cls, acl_cls = nested(cls, "DescribeAclsResource"), nested(cls, "AclDescription")
    resources = tuple(
        build(
            resource_cls,
            resource_type=i8(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=i8(pattern.pattern_type),
            acls=tuple(
                build(
                    acl_cls,
                    principal=entry.principal,
                    host=entry.host,
                    operation=i8(entry.operation),
                    permission_type=i8(entry.permission),
                )
                for entry in entries
            ),
        )
        for pattern, entries in authorizer.describe(acl_filter).items()
    )
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, resources=resources)


def create_acls(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    authorizer = ctx.authorizer
    if authorizer is None:
        return _create_acls_error(version, body, ErrorCode.security_disabled, ALTER_ACLS_DISABLED)
    cls = response_schema(ApiKey.CREATE_ACLS, version)
    result_cls = nested(cls, "AclCreationResult")
    results = []
    valid = []
    for creation in body.creations:
        resource_type = _code(ResourceType, creation.resource_type)
        if resource_type is ResourceType.USER and version < 3:
            resource_type = ResourceType.UNKNOWN
        acl = AclBinding(
            ResourcePattern(resource_type, creation.resource_name, _code(PatternType, creation.resource_pattern_type)),
            AccessEntry(
                creation.principal,
                creation.host,
                _code(Operation, creation.operation),
                _code(Permission, creation.permission_type),
            ),
        )
        refused = binding_error(acl)
        if refused is None:
            valid.append(acl)
            results.append(build(result_cls, error_code=ErrorCode.none, error_message=None))
        else:
            results.append(build(result_cls, error_code=ErrorCode.invalid_request, error_message=refused))
    authorizer.add(valid)
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def delete_acls(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    authorizer = ctx.authorizer
    if authorizer is None:
        return _delete_acls_error(version, body, ErrorCode.security_disabled, ALTER_ACLS_DISABLED)
    cls = response_schema(ApiKey.DELETE_ACLS, version)
    result_cls, matching_cls = nested(cls, "DeleteAclsFilterResult"), nested(cls, "DeleteAclsMatchingAcl")
    filters = [_filter(version, f) for f in body.filters]
    # A filter refused matches nothing: the authorizer is given one that cannot match.
    removed = iter(authorizer.delete(f for f in filters if f.error() is None))
    results = []
    for acl_filter in filters:
        refused = acl_filter.error()
        if refused is not None:
            results.append(
                build(result_cls, error_code=ErrorCode.invalid_request, error_message=refused, matching_acls=())
            )
            continue
        matching = tuple(
            build(
                matching_cls,
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=i8(acl.pattern.resource_type),
                resource_name=acl.pattern.name,
                pattern_type=i8(acl.pattern.pattern_type),
                principal=acl.entry.principal,
                host=acl.entry.host,
                operation=i8(acl.entry.operation),
                permission_type=i8(acl.entry.permission),
            )
            for acl in next(removed)
        )
        results.append(build(result_cls, error_code=ErrorCode.none, error_message=None, matching_acls=matching))
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(results))


def _describe_acls_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    """DescribeAclsRequest.getErrorResponse: the top-level error and message, no resources."""
    return build(
        response_schema(ApiKey.DESCRIBE_ACLS, version),
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=error_message(error) if message is None else message,
        resources=(),
    )


def _create_acls_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    """CreateAclsRequest.getErrorResponse: one result per creation, each the error."""
    cls = response_schema(ApiKey.CREATE_ACLS, version)
    text = error_message(error) if message is None else message
    result = build(nested(cls, "AclCreationResult"), error_code=error, error_message=text)
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(result for _ in body.creations))


def _delete_acls_error(version: int, body: Any, error: ErrorCode, message: str | None = None) -> Any:
    """DeleteAclsRequest.getErrorResponse: one result per filter, each the error with no matching ACL."""
    cls = response_schema(ApiKey.DELETE_ACLS, version)
    text = error_message(error) if message is None else message
    result = build(nested(cls, "DeleteAclsFilterResult"), error_code=error, error_message=text, matching_acls=())
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(result for _ in body.filters))


ROUTES = {
    ApiKey.DESCRIBE_ACLS: Route(describe_acls, _describe_acls_error),
    ApiKey.CREATE_ACLS: Route(create_acls, _create_acls_error),
    ApiKey.DELETE_ACLS: Route(delete_acls, _delete_acls_error),
}
