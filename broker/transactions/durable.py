"""Transactional ids as durable changes (issue 27; cluster-and-durability.md 3.3 and transactions.md 3.1, 3.10).

Kafka's transaction coordinator writes a TransactionLogValue to ``__transaction_state`` at every state change and
answers after it is written; when it loads the partition, an Ongoing transaction stays Ongoing (the timeout scan
aborts it later) and a PrepareCommit/PrepareAbort one is completed by sending its markers again. ``txn.id``
(transactional id) holds the whole ``TxnMetadata``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.transactions.state import TxnMetadata, TxnState

KIND = "txn.id"


def txn_value(meta: TxnMetadata) -> dict[str, Any]:
    value = dataclasses.asdict(meta)
    value["state"] = meta.state.name
    value["partitions"] = sorted([topic, partition] for topic, partition in meta.partitions)
    value["groups"] = sorted(meta.groups)
    return value


def txn_from(value: dict[str, Any]) -> TxnMetadata:
    fields = dict(value)
    fields["state"] = TxnState[value["state"]]
    fields["partitions"] = {(topic, int(partition)) for topic, partition in value["partitions"]}
    fields["groups"] = set(value["groups"])
    return TxnMetadata(**fields)
