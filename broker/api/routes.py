"""Stand-in for the route table (issue 25 item 4): who sent a request, its error answer, the fault-able APIs.

The connection's gates (broker/server/gates.py) code against these three names only; the route table that
declares them beside each handler replaces this module, which delegates to broker/api/fault_answers.py meanwhile.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from broker.api import fault_answers
from protocol.apis import ApiKey


class RequestIdentity(NamedTuple):
    """Who a request names, as far as it names them; the client id is the connection's (the request header's)."""

    group_id: str | None
    member_id: str | None
    group_instance_id: str | None
    transactional_id: str | None


def request_identity(api_key: int, body: Any) -> RequestIdentity:
    group_id, member_id, instance_id = fault_answers.request_identity(api_key, body)
    return RequestIdentity(group_id, member_id, instance_id, fault_answers.request_transactional_id(api_key, body))


def error_answer(api_key: int, version: int, body: Any, error: ErrorCode) -> Any:
    """The answer that is nothing but ``error``, in the API's own shape (Kafka's ``getErrorResponse``)."""
    return fault_answers.error_response(api_key, version, body, error)


# The APIs an ``error`` fault rule can answer for: those a consumer group talks to its coordinator with (KIP-848's
# two included) and a transactional producer's (docs/spec/transactions.md section 2: InitProducerId, the TV1
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit; EndTxn answering CONCURRENT_TRANSACTIONS, say).
FAULTABLE_APIS: frozenset[int] = frozenset(
    {
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.TXN_OFFSET_COMMIT,
    }
)
