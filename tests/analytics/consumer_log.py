"""Consumer-group (KIP-848) event logs written by the real coordinator: the tests' source of truth for them.

``Recorded`` is the consumer-group harness (tests/coordinator/modern/consumer/harness.py: a manual clock, a topic
catalog, KIP-848 clients) with an ``EventHub`` that keeps every record the coordinator emits, as a broker's log
has them. No Spark here: the generator's tests use it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from broker.events.hub import EventHub, Record
from tests.coordinator.modern.consumer.harness import Consumer, ConsumerHarness

T0 = 1_700_000_000_000  # the manual clock's start


@dataclass
class Recorded(ConsumerHarness):
    """The consumer-group harness with an ``EventHub``: every record the coordinator emits, in order."""

    records: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.hub = EventHub(self.clock)
        self.hub.subscribe(self.records.append)
        self.coordinator = self.build_coordinator(events=self.hub)

    def at(self, ms: int) -> None:
        """Move the clock to ``ms`` from the start (timers due on the way fire)."""
        self.advance(T0 + ms - self.clock.now_ms())

    def lines(self) -> list[str]:
        return [json.dumps(record, separators=(",", ":")) for record in self.records]


def heartbeats(h: Recorded, start: int, end: int, *consumers: Consumer) -> None:
    """Steady heartbeats every 500 ms (the harness's interval) from ``start`` to ``end``."""
    for ms in range(start, end + 1, 500):
        h.at(ms)
        for consumer in consumers:
            consumer.poll()


def every_event() -> Recorded:
    """A consumer group through everything the generator writes: joins, a revocation, an expiry, a leave, the
    group emptied and deleted."""
    h = Recorded()
    a, b, c = h.consumer("a"), h.consumer("b"), h.consumer("c")
    a.poll()
    h.at(100)
    b.poll()
    h.at(200)
    c.poll()
    h.settle(a, b, c)
    heartbeats(h, 500, 6000, a, b)  # c is dead: its session (6 s) runs out
    h.at(6700)
    h.settle(a, b)
    b.leave()
    h.settle(a)
    a.leave()
    h.coordinator.delete_groups([a.group_id])
    return h
