"""The authorizer as a gate (broker/server/gates.py): the checks that fail a whole request, before its handler.

Kafka's ``KafkaApis`` checks these first, before the coordinator sees the request (docs/spec/security.md 10): a
JoinGroup without READ on its group creates neither group nor member. The answer is the API's own error response
(``Route.error_answer``: GROUP_AUTHORIZATION_FAILED on every partition of an OffsetCommit, the top-level error of
a Heartbeat, ...). What is decided per resource (a topic of Metadata or Fetch, a group of DescribeGroups, a key of
FindCoordinator v4+) is the handlers' (broker/api/*.py), through ``ApiContext.authorizer``.

While the authorizer is on this gate is always armed: every frame takes the generic path (the Heartbeat fast path
does not know principals), so that nothing escapes a check. With it off the gate does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.security.acl_file import load_acl_file
from broker.security.acls import CLUSTER_NAME, Operation, ResourceType
from broker.security.authorizer import ACL_STORE_FILE, Authorizer
from broker.server.gates import Answer
from protocol.apis import ApiKey, api_name

if TYPE_CHECKING:
    from broker.config.settings import Settings
    from broker.events.hub import GroupEvents
    from broker.server.gates import GateRequest, Verdict

# One check: (operation, resource type, name, the error when it is denied).
Check = tuple[Operation, ResourceType, str, ErrorCode]
_GROUP = ErrorCode.group_authorization_failed
_TOPIC = ErrorCode.topic_authorization_failed
_CLUSTER = ErrorCode.cluster_authorization_failed
_TXN = ErrorCode.transactional_id_authorization_failed
_IDEMPOTENT_WRITE = "idempotent write"  # marks InitProducerId's check without a transactional id (spec 9.3)


def authorizer_for(settings: Settings, events: GroupEvents, now_ms: Callable[[], int]) -> Authorizer:
    """The broker's authorizer: the ACLs its data directory kept, then the ACL file's (AclFileError stops the
    start, naming the line)."""
    acls = settings.acls
    store = Path(settings.data_dir) / ACL_STORE_FILE if settings.data_dir else None
    authorizer = Authorizer(
        acls.super_users, allow_if_no_acl=acls.allow_everyone_if_no_acl_found, events=events, now_ms=now_ms,
        store=store,
    )
    if acls.acl_file:
        authorizer.add(load_acl_file(acls.acl_file))
    if not authorizer.super_users and not authorizer.bindings and not authorizer.allow_if_no_acl:
        from broker.log import get_logger

        # Spec 14.1: ACLs on, nobody allowed anything, and nobody able to grant it (CreateAcls needs ALTER).
        get_logger("kafka.authorizer.logger").warning(
            "ACLs are on with no super user, no ACL and no --allow-everyone-if-no-acl-found: every request that "
            "needs an ACL is denied (give --super-users or --acl-file)"
        )
    return authorizer


def _group_read(body: Any, version: int) -> Iterator[Check]:
    yield Operation.READ, ResourceType.GROUP, body.group_id, _GROUP


def _sync_group(body: Any, version: int) -> Iterator[Check]:
    """READ on the group, after v5's ProtocolType/ProtocolName presence check (INCONSISTENT_GROUP_PROTOCOL is the
    handler's answer, KafkaApis.handleSyncGroupRequest checks it first)."""
    if version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        return
    yield from _group_read(body, version)


def _group_delete(body: Any, version: int) -> Iterator[Check]:
    yield Operation.DELETE, ResourceType.GROUP, body.group_id, _GROUP


def _transactional(body: Any, version: int) -> Iterator[Check]:
    yield Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id, _TXN


def _transactional_group(body: Any, version: int) -> Iterator[Check]:
    """AddOffsetsToTxn, TxnOffsetCommit: WRITE on the id, then READ on the group."""
    yield from _transactional(body, version)
    yield from _group_read(body, version)


def _heartbeat(body: Any, version: int) -> Iterator[Check]:
    """ConsumerGroupHeartbeat / ShareGroupHeartbeat: READ on the group, then DESCRIBE on each subscribed name."""
    yield from _group_read(body, version)
    for topic in body.subscribed_topic_names or ():
        yield Operation.DESCRIBE, ResourceType.TOPIC, topic, _TOPIC


def _produce(body: Any, version: int) -> Iterator[Check]:
    if body.transactional_id is not None:
        yield from _transactional(body, version)


def _init_producer_id(body: Any, version: int) -> Iterator[Check]:
    if body.transactional_id is not None:
        yield from _transactional(body, version)
    else:
        yield Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, _IDEMPOTENT_WRITE, _CLUSTER


def _add_partitions(body: Any, version: int) -> Iterator[Check]:
    if version <= 3:
        yield Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.v3_and_below_transactional_id, _TXN


def _find_coordinator(body: Any, version: int) -> Iterator[Check]:
    """v0-3 ask about one key, answered whole; v4+ keys are checked one by one by the handler."""
    if version < 4:
        key_type = getattr(body, "key_type", 0)  # v0 knows only groups
        if key_type == 1:
            yield Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, body.key, _TXN
        elif key_type == 0:
            yield Operation.DESCRIBE, ResourceType.GROUP, body.key, _GROUP


def _cluster(operation: Operation) -> Callable[[Any, int], Iterator[Check]]:
    def check(body: Any, version: int) -> Iterator[Check]:
        yield operation, ResourceType.CLUSTER, CLUSTER_NAME, _CLUSTER

    return check


# API key -> the checks that fail its whole request (spec 10, the "whole" rows), in Kafka's order.
WHOLE_REQUEST_CHECKS: dict[int, Callable[[Any, int], Iterator[Check]]] = {
    ApiKey.JOIN_GROUP: _group_read,
    ApiKey.SYNC_GROUP: _sync_group,
    ApiKey.HEARTBEAT: _group_read,
    ApiKey.LEAVE_GROUP: _group_read,
    ApiKey.OFFSET_COMMIT: _group_read,
    ApiKey.OFFSET_DELETE: _group_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _heartbeat,
    ApiKey.SHARE_GROUP_HEARTBEAT: _heartbeat,
    ApiKey.SHARE_FETCH: _group_read,
    ApiKey.SHARE_ACKNOWLEDGE: _group_read,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _group_read,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _group_delete,
    ApiKey.WRITE_TXN_MARKERS: _cluster(Operation.CLUSTER_ACTION),  # the brokers' own API
    ApiKey.PRODUCE: _produce,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: _transactional_group,
    ApiKey.TXN_OFFSET_COMMIT: _transactional_group,
    ApiKey.END_TXN: _transactional,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.DESCRIBE_ACLS: _cluster(Operation.DESCRIBE),
    ApiKey.CREATE_ACLS: _cluster(Operation.ALTER),
    ApiKey.DELETE_ACLS: _cluster(Operation.ALTER),
    # The SCRAM credential APIs (KafkaApis.handleDescribeUserScramCredentialsRequest / handleAlterUser...): 31 on
    # the whole request, before any user is looked at or changed.
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(Operation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(Operation.ALTER),
}


class AuthorizationGate:
    """The whole-request checks of ``WHOLE_REQUEST_CHECKS`` for the request's principal and host."""

    __slots__ = ("_authorizer", "armed")

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer
        self.armed = True  # always, while it exists: no fast path may skip a check

    def check(self, request: GateRequest) -> Verdict | None:
        checks = WHOLE_REQUEST_CHECKS.get(request.api_key)
        if checks is None or request.body is None:
            return None
        authorizer = self._authorizer
        client = request.client
        api = "".join(word.capitalize() for word in api_name(request.api_key).split("_"))  # Kafka's: JoinGroup
        for operation, resource_type, name, error in checks(request.body, request.api_version):
            if name is _IDEMPOTENT_WRITE:
                # IDEMPOTENT_WRITE on the cluster, else WRITE on any topic (spec 9.3); not logged for the first.
                if authorizer.authorize(client, api, operation, resource_type, CLUSTER_NAME, report=False):
                    continue
                if authorizer.authorize_by_resource_type(client, api, Operation.WRITE, ResourceType.TOPIC):
                    continue
                return Answer(error)
            if not authorizer.authorize(client, api, operation, resource_type, name):
                return Answer(error)
        return None
