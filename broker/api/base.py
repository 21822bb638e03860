"""What every API handler is given, and the constants the responses share."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from protocol.codec import build, nested, response_schema

if TYPE_CHECKING:  # annotations only: `serve` answers its first ApiVersions before the coordinator loads (issue 17)
    from broker.cluster.routing import NodeRoute
    from broker.config.settings import Settings
    from broker.coordinator.client import Client
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.coordinator.messages import PartitionErrors
    from broker.security.authorizer import Authorizer
    from broker.security.sasl.authenticator import SaslListener
    from broker.security.users import UserStore
    from broker.storage.delayed_fetch import DelayedFetches
    from broker.storage.topics import TopicRegistry
    from broker.transactions.coordinator import TransactionCoordinator

NO_THROTTLE = datetime.timedelta(0)
# AuthorizedOperations when none were asked for (Kafka's Integer.MIN_VALUE).
NO_AUTHORIZED_OPERATIONS = i32(-(2**31))
_MILLISECOND = datetime.timedelta(milliseconds=1)

# Kafka's default texts for the errors whose message reaches the wire (FindCoordinator v1+).
ERROR_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library or the message "
        "was sent to an incompatible broker. See the broker logs for more details."
    ),
}


def error_message(error: ErrorCode) -> str:
    """The text Kafka sends with ``error`` where a response carries one (``ApiError.fromThrowable``: the message of
    the error's own exception); our short list above, else the error's name."""
    return ERROR_MESSAGES.get(error, error.name.upper())


def millis(value: datetime.timedelta) -> int:
    return value // _MILLISECOND


def partition_errors(cls: type, prefix: str, result: PartitionErrors) -> tuple[Any, ...]:
    """The per-partition error codes of a response ``cls`` whose nested structures are ``{prefix}Topic`` and
    ``{prefix}Partition`` (OffsetCommit, OffsetDelete), for a handler's answer and a fault rule's alike."""
    topic_cls = nested(cls, f"{prefix}Topic")
    partition_cls = nested(cls, f"{prefix}Partition")
    return tuple(
        build(
            topic_cls,
            name=topic,
            partitions=tuple(build(partition_cls, partition_index=i32(p), error_code=e) for p, e in partitions),
        )
        for topic, partitions in result
    )


@dataclass(slots=True, frozen=True)
class BrokerIdentity:
    node_id: int
    host: str
    port: int
    cluster_id: str


@dataclass(slots=True)
class ApiContext:
    """The broker-wide state the handlers work on."""

    coordinator: GroupCoordinator
    topics: TopicRegistry
    identity: BrokerIdentity
    fetches: DelayedFetches
    # Kafka hands out producer ids from 0 upward, in blocks; one broker needs only the counter.
    producer_ids: Iterator[int] = field(default_factory=itertools.count)
    # What the broker runs with, for DescribeConfigs on the broker (broker/api/configs.py); None in bare tests.
    settings: Settings | None = None
    # The transaction coordinator (transactions spec section 3); None in bare tests: no transactions then.
    transactions: TransactionCoordinator | None = None
    # The control API's URL as this listener's clients reach it, for DescribeConfigs (broker/api/configs.py);
    # None when it is off or in bare tests.
    control_url: str | None = None
    # This listener's node of a multi-node broker (issue 29: who coordinates and leads what); None for one node,
    # which coordinates and leads everything, as before.
    route: NodeRoute | None = None
    # The ACL authorizer (issue 30, broker/security/authorizer.py); None when ACLs are off: handlers check nothing.
    authorizer: Authorizer | None = None
    # Issue 30: this listener's SASL (None: it does not authenticate), and the broker's SASL users, made on first
    # use (the SCRAM credential APIs and the SASL listeners share them); None in bare tests.
    sasl: SaslListener | None = None
    user_store: Callable[[], UserStore] | None = None


@dataclass(slots=True, frozen=True)
class Call:
    """One request's version and sender."""

    api_version: int
    client: Client


class NoResponse:
    """Produce with acks=0: Kafka sends nothing back."""


NO_RESPONSE = NoResponse()


@dataclass(slots=True, frozen=True)
class CloseConnection:
    """Produce with acks=0 that failed: Kafka closes the connection so the producer notices."""

    reason: str


class Refused(Exception):
    """One resource of an admin request refused (a topic of CreateTopics or CreatePartitions, a config resource):
    its error and message go into that resource's result while the others go on, as Kafka's ``ApiError`` does."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class InvalidRequest(Exception):
    """A request Kafka's handler refuses with InvalidRequestException: ``KafkaApis.handleError`` logs it with the
    request's context (peer and client) and answers with the request's error response (``getErrorResponse``), here
    ``answer``. The connection does both; the handler only says why and what to answer."""

    def __init__(self, reason: str, answer: Any) -> None:
        super().__init__(reason)
        self.answer = answer


# A handler returns a kio response dataclass, a Deferred one for a parked answer, NO_RESPONSE or CloseConnection,
# or raises InvalidRequest.
Handler = Callable[[ApiContext, Call, Any], Any]


class RequestIdentity(NamedTuple):
    """Who a request says it comes from, as far as it names them (the client id is the header's, which the
    connection adds): what a fault rule matches."""

    group_id: str | None
    member_id: str | None
    group_instance_id: str | None
    transactional_id: str | None


def named_identity(body: Any) -> RequestIdentity:
    """The identity of a request whose fields have the usual names (GroupId, MemberId, GroupInstanceId,
    TransactionalId); an API that names them otherwise declares its own beside its handler."""
    return RequestIdentity(
        getattr(body, "group_id", None),
        getattr(body, "member_id", None),
        getattr(body, "group_instance_id", None),
        getattr(body, "transactional_id", None),
    )


def routed_away(ctx: ApiContext, group_id: str) -> ErrorCode | None:
    """With several nodes (issue 29), the error of a group this node does not serve: NOT_COORDINATOR, or
    COORDINATOR_LOAD_IN_PROGRESS while its partition loads; None when it does. A request naming several groups
    (DescribeGroups, DeleteGroups, OffsetFetch v8+, the describes) answers it in that group's own entry and is
    served for the rest, as Kafka's GroupCoordinatorService fans such a request out per partition."""
    route = ctx.route
    return None if route is None else route.group_error(group_id)


# (version, request body, error) -> the answer that is nothing but ``error``: a kio response, or CloseConnection.
ErrorAnswer = Callable[[int, Any, ErrorCode], Any]


@dataclass(slots=True, frozen=True)
class Route:
    """One API as its family module serves it: the handler, the error answer (Kafka's
    ``AbstractRequest.getErrorResponse``, which ``KafkaApis`` sends when handling fails: a fault rule's ``error``
    answer here) and who the request names. Each family module declares ``ROUTES: dict[int, Route]``."""

    handler: Handler
    error_answer: ErrorAnswer
    identity: Callable[[Any], RequestIdentity] = named_identity


def top_level_error(api_key: int, **fields: Any) -> ErrorAnswer:
    """The error answer of an API whose response has a top-level error (and, in the versions that have one, its
    ErrorMessage), ``fields`` for the rest of the response: Heartbeat, EndTxn, ListGroups, DescribeCluster, ..."""

    def answer(version: int, body: Any, error: ErrorCode) -> Any:
        return build(
            response_schema(api_key, version),
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=error_message(error),
            **fields,
        )

    return answer
