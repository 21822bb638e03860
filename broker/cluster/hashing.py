"""Kafka's ``partitionFor``: a group id or transactional id to its ``__consumer_offsets`` / ``__transaction_state``
partition (GroupCoordinatorService.partitionFor, TransactionStateManager.partitionFor).

``Utils.abs(key.hashCode()) % partitions`` with Java's ``String.hashCode`` over UTF-16 code units (a character
outside the BMP counts as its two surrogates) in wrapping 32-bit arithmetic, and ``Utils.abs``, which maps
``Integer.MIN_VALUE`` to 0 where ``Math.abs`` would leave it negative (cluster-and-durability.md 1.1).
"""

from __future__ import annotations

import struct
from functools import lru_cache

_MASK = 0xFFFFFFFF
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"


def java_string_hash(text: str) -> int:
    """``String.hashCode``: h = 31*h + unit over the UTF-16 code units, as a signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & _MASK
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(value: int) -> int:
    """``Utils.abs``: the absolute value, and 0 for Integer.MIN_VALUE."""
    return 0 if value == -(1 << 31) else abs(value)


@lru_cache(maxsize=65536)  # a group's partition is asked on every request of a multi-node broker
def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions
