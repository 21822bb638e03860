"""FindCoordinator (10): one node coordinates every group and every transactional id; with ``--nodes N`` (issue
29) the coordinator is the leader of the key's ``__consumer_offsets`` / ``__transaction_state`` partition, the same
answer from every node (cluster-and-durability.md 1.2), COORDINATOR_NOT_AVAILABLE when that partition has no leader.

Transaction keys (type 1) name this broker when it runs a transaction coordinator (transactions spec 2.2), else
COORDINATOR_NOT_AVAILABLE. Share keys (v6) are answered COORDINATOR_NOT_AVAILABLE: the broker offers no such
coordinator, and that is what Kafka answers while the coordinator's internal topic is unavailable. An unknown key
type, or a share key before v6, fails the whole request with INVALID_REQUEST as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.api.base import ERROR_MESSAGES, NO_THROTTLE, ApiContext, Call, RequestIdentity, Route, error_message
from broker.security.acls import Operation, ResourceType
from protocol.apis import ApiKey
from protocol.codec import build, nested, response_schema

GROUP, TRANSACTION, SHARE = 0, 1, 2


def find_coordinator(ctx: ApiContext, call: Call, body: Any) -> Any:
    version = call.api_version
    cls = response_schema(ApiKey.FIND_COORDINATOR, version)
    key_type = getattr(body, "key_type", GROUP)
    if key_type in (GROUP, TRANSACTION) or (key_type == SHARE and version >= 6):
        request_error = None
    else:
        request_error = ErrorCode.invalid_request
    identity = ctx.identity
    route = ctx.route

    def locate(error: ErrorCode, key: str = "") -> dict[str, Any]:
        if error is ErrorCode.none:
            if route is None:
                node, host, port = identity.node_id, identity.host, identity.port
            else:
                layout = route.layout
                node = layout.group_coordinator(key) if key_type == GROUP else layout.transaction_coordinator(key)
                if node < 0 or node not in route.endpoints:
                    return locate(ErrorCode.coordinator_not_available)
                host, port = route.endpoints[node]
            return {"error_code": error, "node_id": i32(node), "host": host, "port": i32(port)}
        return {"error_code": error, "node_id": i32(-1), "host": "", "port": i32(-1)}

    served = key_type == GROUP or (key_type == TRANSACTION and ctx.transactions is not None)
    key_error = ErrorCode.none if served else ErrorCode.coordinator_not_available
    if version < 4:
        error = request_error or key_error
        located = locate(error, body.key)
        message = ERROR_MESSAGES[located["error_code"]]
        return build(cls, throttle_time=NO_THROTTLE, error_message=message, **located)

    coordinator_cls = nested(cls, "Coordinator")
    entries = []
    authorizer = ctx.authorizer  # issue 30: DESCRIBE on each key (v0-3: the authorization gate's, whole)
    for key in body.coordinator_keys:
        if authorizer is not None and request_error is None and key_type in (GROUP, TRANSACTION):
            kind = ResourceType.GROUP if key_type == GROUP else ResourceType.TRANSACTIONAL_ID
            if not authorizer.authorize(call.client, "FindCoordinator", Operation.DESCRIBE, kind, key):
                denial = (
                    ErrorCode.group_authorization_failed
                    if key_type == GROUP
                    else ErrorCode.transactional_id_authorization_failed
                )
                entries.append(build(coordinator_cls, key=key, error_message=error_message(denial), **locate(denial)))
                continue
        if request_error is not None:
            refused = ERROR_MESSAGES[request_error]
            entries.append(build(coordinator_cls, key=key, error_message=refused, **locate(request_error)))
        else:
            entries.append(build(coordinator_cls, key=key, error_message=None, **locate(key_error, key)))
    return build(cls, throttle_time=NO_THROTTLE, coordinators=tuple(entries))


def _find_coordinator_error(version: int, body: Any, error: ErrorCode) -> Any:
    """FindCoordinatorRequest.getErrorResponse: v0-3 the one answer, v4+ every requested key, on no node."""
    cls = response_schema(ApiKey.FIND_COORDINATOR, version)
    nowhere = {"error_code": error, "node_id": i32(-1), "host": "", "port": i32(-1)}
    message = error_message(error)
    if version < 4:
        return build(cls, throttle_time=NO_THROTTLE, error_message=message, **nowhere)
    coordinator_cls = nested(cls, "Coordinator")
    entries = tuple(build(coordinator_cls, key=key, error_message=message, **nowhere) for key in body.coordinator_keys)
    return build(cls, throttle_time=NO_THROTTLE, coordinators=entries)


def _find_coordinator_identity(body: Any) -> RequestIdentity:
    """The first key the request asks about (v4+ batch them, v0-3 send one), as a group id or a transactional id
    by its KeyType."""
    keys = getattr(body, "coordinator_keys", None)
    key = keys[0] if keys else getattr(body, "key", None)
    key_type = getattr(body, "key_type", GROUP)
    return RequestIdentity(key if key_type == GROUP else None, None, None, key if key_type == TRANSACTION else None)


ROUTES = {ApiKey.FIND_COORDINATOR: Route(find_coordinator, _find_coordinator_error, _find_coordinator_identity)}
