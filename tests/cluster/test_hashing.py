"""Kafka's partitionFor against the worked values of cluster-and-durability.md 1.1 (checked there on a JVM)."""

from __future__ import annotations

import pytest

from broker.cluster.hashing import java_string_hash, kafka_abs, partition_for

TABLE = [
    ("", 0, 0, 0),
    ("a", 97, 47, 1),
    ("my-group", -1906497762, 12, 0),
    ("test-group", 627841412, 12, 2),
    ("group-1", 293427299, 49, 2),
    ("console-consumer-12345", 158455506, 6, 0),
    ("orders-service", 23943117, 17, 0),
    ("polygenelubricants", -2147483648, 0, 0),
    ("größe", 98762257, 7, 1),
    ("\U0001f600", 1772899, 49, 1),
]


@pytest.mark.parametrize(("key", "hash_code", "of_50", "of_3"), TABLE)
def test_partition_for_matches_kafka(key: str, hash_code: int, of_50: int, of_3: int) -> None:
    """Checklist item 1: String.hashCode over UTF-16 units, Utils.abs, modulo the partition count."""
    assert java_string_hash(key) == hash_code
    assert partition_for(key, 50) == of_50
    assert partition_for(key, 3) == of_3


def test_utils_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5 and kafka_abs(7) == 7
