"""Topic ids as Kafka makes them (docs/spec/consumer-groups.md section 3.6)."""

from __future__ import annotations

import base64
import uuid

from broker.storage.topics import new_topic_id


def test_topic_ids_are_random_non_zero_and_never_start_with_a_dash() -> None:
    ids = [new_topic_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert uuid.UUID(int=0) not in ids and uuid.UUID(int=1) not in ids
    assert not any(base64.urlsafe_b64encode(i.bytes).startswith(b"-") for i in ids)
