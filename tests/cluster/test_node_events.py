"""What the nodes say about a coordinator move (issue 29; cluster-and-durability.md 8.2): ``coordinator_unloaded``
at once, ``coordinator_loaded`` when the load ends (after the load delay, on the manual clock), the group
coordinator told which ``__consumer_offsets`` partitions moved."""

from __future__ import annotations

from typing import Any

from broker.cluster.hashing import OFFSETS_TOPIC
from broker.cluster.layout import ClusterLayout, Moved
from broker.server.nodes import NodeSet
from broker.timing.clock import ManualClock
from broker.timing.purgatory import Purgatory


class Recorded:
    wants_debug = False

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        self.events.append((event, fields))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [fields for event, fields in self.events if event == name]


def nodes(load_delay_ms: int) -> tuple[NodeSet, Recorded, ManualClock, list[list[Moved]]]:
    clock = ManualClock()
    purgatory = Purgatory(clock)
    clock.attach(purgatory)
    events = Recorded()
    node_set = NodeSet(ClusterLayout([1, 2, 3]), events, set, clock.now_ms, load_delay_ms)
    node_set.purgatory = purgatory
    told: list[list[Moved]] = []
    node_set.on_coordinators_moved = told.append
    return node_set, events, clock, told


def test_loaded_is_said_when_the_load_delay_ends() -> None:
    node_set, events, clock, told = nodes(3_000)
    moved = node_set.move_coordinator("group", "my-group", 2)
    assert [m.partition for m in told[0]] == [moved.partition] and told[0][0].topic == OFFSETS_TOPIC
    assert events.named("coordinator_unloaded") and not events.named("coordinator_loaded")
    clock.advance(2_999)
    assert not events.named("coordinator_loaded")
    clock.advance(1)
    (loaded,) = events.named("coordinator_loaded")
    assert (loaded["partition"], loaded["node_id"], loaded["load_delay_ms"]) == (moved.partition, 2, 3_000)
    assert loaded["duration_ms"] >= 3_000


def test_a_second_move_during_the_load_ends_the_first_unsaid() -> None:
    node_set, events, clock, _ = nodes(3_000)
    node_set.move_coordinator("group", "my-group", 2)
    clock.advance(1_000)
    node_set.load_delay_ms = 0
    node_set.move_coordinator("group", "my-group", 3)
    (loaded,) = events.named("coordinator_loaded")
    assert loaded["node_id"] == 3
    clock.advance(5_000)
    assert len(events.named("coordinator_loaded")) == 1


def test_without_a_delay_loaded_follows_at_once() -> None:
    node_set, events, _, _ = nodes(0)
    node_set.move_coordinator("transaction", "txn-1", 3)
    assert [name for name, _ in events.events][-2:] == ["coordinator_unloaded", "coordinator_loaded"]
