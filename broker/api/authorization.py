"""What the handlers share to authorize per resource (issue 30, docs/spec/security.md 10): the topics of a
request the client may not act on. Every helper answers "nothing denied" at once when ACLs are off."""

from __future__ import annotations

from collections.abc import Iterable

from broker.api.base import ApiContext, Call
from broker.security.acls import Operation, ResourceType

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


def group_denied(ctx: ApiContext, call: Call, api: str, operation: Operation, group_id: str) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return False
    return not authorizer.authorize(call.client, api, operation, ResourceType.GROUP, group_id)
