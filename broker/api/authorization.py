"""What the handlers share to authorize per resource (issue 30, docs/spec/security.md 10): the topics of a
request the client may not act on. Every helper answers "nothing denied" at once when ACLs are off."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.api.base import ApiContext, Call, Refused
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType

NOTHING: frozenset[str] = frozenset()


def denied_topics(ctx: ApiContext, call: Call, api: str, operation: Operation, names: Iterable[str]) -> frozenset[str]:
    """The names among ``names`` the client may not do ``operation`` on (each denial logged once)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return NOTHING
    return frozenset(
        name
        for name in dict.fromkeys(names)
        if not authorizer.authorize(call.client, api, operation, ResourceType.TOPIC, name)
    )


def topic_allowed(ctx: ApiContext, call: Call, api: str, operation: Operation, name: str) -> bool:
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize(call.client, api, operation, ResourceType.TOPIC, name)


def group_denied(ctx: ApiContext, call: Call, api: str, operation: Operation, group_id: str) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return False
    return not authorizer.authorize(call.client, api, operation, ResourceType.GROUP, group_id)


# A config resource's type (DescribeConfigs' codes: TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32) -> the ACL
# resource it is authorized on, the error and Kafka's message (Errors' default) when it is not.
_CONFIG_RESOURCES: dict[int, tuple[ResourceType, ErrorCode, str]] = {
    2: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
    4: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    8: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
    32: (ResourceType.GROUP, ErrorCode.group_authorization_failed, "Group authorization failed."),
}


def check_config_access(
    ctx: ApiContext, call: Call, api: str, operation: Operation, config_type: int, name: str
) -> None:
    """DESCRIBE_CONFIGS or ALTER_CONFIGS on a config resource (a broker's on the cluster): Refused when denied."""
    authorizer = ctx.authorizer
    found = _CONFIG_RESOURCES.get(config_type)
    if authorizer is None or found is None:
        return
    kind, error, message = found
    resource = CLUSTER_NAME if kind is ResourceType.CLUSTER else name
    if not authorizer.authorize(call.client, api, operation, kind, resource):
        raise Refused(error, message)
