"""The one group registry, the Group protocol's answers and the offset store (issue 25 items 1 and 2)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from broker.coordinator.classic.group import ClassicGroup
from broker.coordinator.group_type import GroupType
from broker.coordinator.messages import PartitionCommit, TxnCommitRequest
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.registry import GroupRegistry, WrongGroupType
from tests.coordinator.harness import GROUP, E, Harness
from tests.coordinator.modern.consumer.harness import ConsumerHarness, consumer_config


class Recorded:
    wants_debug = False

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        self.events.append((event, group_id, fields))


def test_group_ids_are_one_namespace_and_typed_getters_say_what_a_group_is_not() -> None:
    registry = GroupRegistry()
    registry.add_classic(ClassicGroup("c", 0, registry.offsets))
    registry.add_consumer(ConsumerGroup("m", 0, registry.offsets))
    assert registry.type_of("c") is GroupType.CLASSIC and registry.type_of("m") is GroupType.CONSUMER
    assert registry.type_of("x") is None
    assert list(registry.groups) == ["c", "m"] and list(registry.of_type(GroupType.CONSUMER)) == ["m"]
    with pytest.raises(WrongGroupType, match=r"^Group c is not a consumer group\.$"):
        registry.consumer("c")
    with pytest.raises(WrongGroupType, match=r"^Group m is not a classic group\.$"):
        registry.classic("m")
    with pytest.raises(WrongGroupType, match=r"^Group x not found\.$"):
        registry.consumer("x")
    with pytest.raises(ValueError, match="already exists as a classic"):
        registry.add_consumer(ConsumerGroup("c", 0, registry.offsets))
    registry.remove(registry.classic("c"))
    assert registry.get("c") is None and "c" not in registry.classic_groups


def test_group_type_is_the_wire_and_json_name() -> None:
    assert [str(t) for t in GroupType] == ["classic", "consumer", "share"]
    assert GroupType.CONSUMER == "consumer" and "classic" in {GroupType.CLASSIC}


def test_txn_offset_commit_reads_the_metadata_limit_per_call_as_offset_commit_does() -> None:
    h = Harness()
    h.coordinator.config = dataclasses.replace(h.coordinator.config, offset_metadata_max_bytes=2)
    topics = (("t", (PartitionCommit(0, 1, -1, "abc"), PartitionCommit(1, 2, -1, "ok"))),)
    result = h.coordinator.commit_transactional_offsets(TxnCommitRequest(GROUP, 7, 0, topics))
    assert result == (("t", ((0, E.offset_metadata_too_large), (1, E.none))),)
    assert h.commit({("t", 0): 1}, metadata="abc") == {("t", 0): E.offset_metadata_too_large}
    assert h.commit({("t", 0): 1}, metadata="ok") == {("t", 0): E.none}


def test_conversion_keeps_the_offsets_in_place() -> None:
    """Section 9.4: an Empty consumer group becoming classic keeps its offsets, the same objects (no copy)."""
    h = ConsumerHarness()
    h.ok(h.cjoin("a"))
    h.commit({("t", 0): 10}, member_id="a", generation_id=1)
    stored = h.cgroup().offsets[("t", 0)]
    h.ok(h.hb("a", -1))
    h.stable_group(1)
    assert h.coordinator.group_type(GROUP) is GroupType.CLASSIC
    assert h.group().offsets[("t", 0)] is stored


def test_a_consumer_groups_last_offsets_expiring_is_the_offsets_expired_event() -> None:
    """Expiry is written once for every type: a consumer group says offsets_expired as a classic group does."""
    h = ConsumerHarness(config=consumer_config(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000))
    recorded = Recorded()
    h.coordinator = h.build_coordinator(events=recorded)
    h.ok(h.cjoin("a"))
    h.commit({("u", 0): 10}, member_id="a", generation_id=1)  # a topic no member subscribes to
    h.ok(h.hb("a", -1))
    recorded.events.clear()
    h.advance(60_000)
    assert [(event, fields.get("reason")) for event, _, fields in recorded.events] == [
        ("offsets_expired", None),
        ("group_deleted", "empty group without offsets expired"),
    ]
    assert recorded.events[0][2] == {"group_type": "consumer"}
