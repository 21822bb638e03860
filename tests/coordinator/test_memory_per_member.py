"""What a classic member costs (issue 17: at most 1,024 B of RSS per member at 100,000 members).

10,000 dynamic members in 100 groups of 100 are formed as the scale benchmark forms them (KIP-394's two
JoinGroups, a SyncGroup each, the leader's assignment one partition per member), every string and bytes of a
request a fresh object as the wire decodes it; tracemalloc counts what the coordinator keeps. The budgets have a
margin over what was measured when they were set (benchmarks/README.md, "Where a member's bytes go"): a change
that adds a per-member object or stops sharing one fails here before it shows in the benchmark.
"""

from __future__ import annotations

import gc
import itertools
import logging
import struct
import sys
import tracemalloc

import structlog

from broker.coordinator.classic.member import Member
from broker.coordinator.client import Client
from broker.coordinator.config import GroupConfig
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.messages import JoinRequest, SyncRequest
from broker.events.hub import EventHub
from broker.timing.clock import ManualClock
from broker.timing.purgatory import Deadline, Purgatory

MEMBERS = 10_000
GROUP_SIZE = 100
CONNECTIONS = 200  # members share a connection's client id and host, as the benchmark's formation connections do

#: Measured 718 B per member (2026-11-27) with the event buffers out of the count; ~1,700 B before issue 17.
COORDINATOR_BUDGET = 850
#: The event buffers hold at most ``buffer_total`` records whatever the member count: measured 963 B a record
#: (the record, its fields and the request strings it keeps; a group's sync_completed maps all its members).
EVENT_RECORD_BUDGET = 1_200


def fresh(text: str) -> str:
    """An equal string that is a new object, as kio decodes each request's strings."""
    return text.encode().decode()


def subscription(topic: str) -> bytes:
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def assignment(topic: str, partition: int) -> bytes:
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">iii", 1, partition, -1)


class Formation:
    def __init__(self, buffer_total: int) -> None:
        self.clock = ManualClock()
        purgatory = Purgatory(self.clock)
        self.clock.attach(purgatory)
        counter = itertools.count(1)
        # Quiet loggers: the events' log lines would cost this test its speed, not the coordinator its memory.
        quiet = structlog.wrap_logger(None, wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        self.events = EventHub(self.clock, buffer_total=buffer_total, log=quiet)
        self.coordinator = GroupCoordinator(
            GroupConfig(initial_rebalance_delay_ms=0),
            self.clock,
            purgatory,
            events=self.events,
            log=quiet,
            new_uuid=lambda: f"{next(counter):08x}-0000-4000-8000-000000000000",
            partition_count=lambda topic: GROUP_SIZE,
        )
        self.clients = [Client(fresh("consumer"), fresh(f"/10.0.{c // 250}.{c % 250}")) for c in range(CONNECTIONS)]
        self._joined = 0

    def group(self, group_id: str) -> None:
        """One group of GROUP_SIZE members, Stable; the requests are dropped once answered, as the wire's are."""
        coordinator = self.coordinator
        pending: list[tuple[str, Client]] = []
        for _ in range(GROUP_SIZE):
            client = self.clients[self._joined % CONNECTIONS]
            self._joined += 1
            first = coordinator.join(self._join(group_id, "", client))
            pending.append((fresh(first.value.member_id), client))
        joins = [coordinator.join(self._join(group_id, member_id, client)) for member_id, client in pending]
        self.clock.advance(1)  # the initial rebalance delay (0) runs out: the join phase completes
        results = [join.value for join in joins]
        leader, generation = results[0].leader, results[0].generation_id
        plan = tuple((fresh(r.member_id), assignment("topic", p)) for p, r in enumerate(results))
        for result in results:
            synced = coordinator.sync(
                SyncRequest(
                    group_id=fresh(group_id),
                    generation_id=generation,
                    member_id=fresh(result.member_id),
                    assignments=plan if result.member_id == leader else (),
                    api_version=3,
                )
            )
            assert synced.done

    @staticmethod
    def _join(group_id: str, member_id: str, client: Client) -> JoinRequest:
        return JoinRequest(
            group_id=fresh(group_id),
            member_id=member_id,
            session_timeout_ms=int(fresh("45000")),
            rebalance_timeout_ms=int(fresh("300000")),
            protocol_type=fresh("consumer"),
            protocols=((fresh("range"), subscription("topic")),),
            group_instance_id=None,
            reason=None,
            api_version=5,
            client=client,
        )

    def bytes_per_member(self, prefix: str) -> float:
        """Traced bytes kept per member for MEMBERS more members (after a warm-up group outside the count)."""
        self.group(f"{prefix}-warm-up")
        gc.collect()
        started = not tracemalloc.is_tracing()  # under PYTHONTRACEMALLOC it already counts
        if started:
            tracemalloc.start(1)
        try:
            before = tracemalloc.get_traced_memory()[0]
            for index in range(MEMBERS // GROUP_SIZE):
                self.group(f"{prefix}-{index}")
            gc.collect()
            return (tracemalloc.get_traced_memory()[0] - before) / MEMBERS
        finally:
            if started:
                tracemalloc.stop()


def test_a_member_costs_the_coordinator_under_its_budget() -> None:
    # Event buffers out of the count (one record): they are bounded by their budget, not by members.
    per_member = Formation(buffer_total=1).bytes_per_member("g")
    assert per_member < COORDINATOR_BUDGET, f"{per_member:.0f} B per member"


def test_event_buffers_cost_their_budget_not_the_members() -> None:
    budget = MEMBERS // 4
    with_events = Formation(buffer_total=budget).bytes_per_member("g")
    without = Formation(buffer_total=1).bytes_per_member("g")
    per_record = (with_events - without) * MEMBERS / budget
    assert 0 < per_record < EVENT_RECORD_BUDGET, f"{per_record:.0f} B per buffered event record"


def test_members_share_what_they_send_alike() -> None:
    formation = Formation(buffer_total=1)
    formation.group("g")
    group = formation.coordinator.groups["g"]
    first, second = list(group.members.values())[:2]
    assert not hasattr(first, "__dict__") and not hasattr(first.expiry, "__dict__")
    for name in ("client_id", "protocol_type", "protocols", "session_timeout_ms", "rebalance_timeout_ms"):
        assert getattr(first, name) is getattr(second, name), name
    members = list(group.members.values())
    assert len({id(m.client_host) for m in members}) == len({m.client_host for m in members})
    # One heartbeat key per member, the purgatory's, holding the member's own id string; one shared action.
    expiry = first.expiry
    assert isinstance(expiry, Deadline) and second.expiry is not None
    assert first.heartbeat_key is expiry.key and first.heartbeat_key[2] is first.member_id
    assert next(k for k in group.members if k == first.member_id) is first.member_id
    assert expiry.action is second.expiry.action
    # The referee's view of the generation: equal assignment bytes share one decoded value.
    view = group.assignment_view
    assert view is not None and len(view) == len(group.members)
    formation.group("h")
    other = formation.coordinator.groups["h"].assignment_view
    assert other is not None
    assert list(view.values())[3] is list(other.values())[3]
    # A KIP-394 pending id set and the not-yet-synced set, emptied, give their tables back.
    assert sys.getsizeof(group.pending_members) == sys.getsizeof(set())
    assert sys.getsizeof(group.not_yet_synced) == sys.getsizeof(set())
    assert sys.getsizeof(first) <= 152, "a member's slots"
    assert isinstance(first, Member)
