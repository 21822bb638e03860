"""A deterministic world for the coordinator: one GroupCoordinator on a ManualClock, six simulated clients, and a
schedule of steps (``steps.py``) run against them with Kafka's invariants checked after every step
(``invariants.py``).

Nothing here sleeps or touches a socket: a step is one method call on the coordinator (or one clock advance that
fires the due deadlines in order), so a schedule replays identically every time. A client behaves as Kafka's
consumer does with what it is told (it keeps the member id a JoinGroup gives it, forgets it on UNKNOWN_MEMBER_ID,
and has one request in flight at a time, since the broker mutes a connection with a parked request); what it sends
next, and when time passes, is the schedule's choice, so members that stop heartbeating, never sync, rejoin with
other protocols or restart all happen.

To replay a schedule a failure printed: ``replay(config, [Join(client=0), Advance(choice=5), ...])``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.changes import MemoryChanges
from broker.cluster.hashing import partition_for
from broker.coordinator.config import GroupConfig
from broker.coordinator.coordinator import Conflict, GroupCoordinator, UnknownTarget
from broker.coordinator.messages import (
    Client,
    CommitRequest,
    JoinRequest,
    JoinResult,
    LeavingMember,
    PartitionCommit,
    SyncRequest,
    SyncResult,
)
from broker.timing.clock import ManualClock
from broker.timing.deferred import Deferred
from broker.timing.purgatory import Purgatory
from tests.coordinator.harness import subscription
from tests.simulation import invariants
from tests.simulation.steps import (
    ADVANCE_CHOICES_MS,
    CLIENTS,
    GROUPS,
    PROTOCOL_CHOICES,
    REBALANCE_CHOICES_MS,
    SESSION_CHOICES_MS,
    STATIC_CLIENTS,
    Advance,
    Commit,
    DeleteGroup,
    Fence,
    ForceRebalance,
    Heartbeat,
    Join,
    Kick,
    Leave,
    MoveCoordinator,
    Poll,
    Restart,
    Round,
    Step,
    Sync,
    group_of,
)

E = ErrorCode

#: The coordinator settings a schedule runs under (chosen by index): Kafka's initial rebalance delay, none, and a
#: group.max.size smaller than a group's clients.
CONFIGS: tuple[GroupConfig, ...] = (
    GroupConfig(initial_rebalance_delay_ms=3_000),
    GroupConfig(initial_rebalance_delay_ms=0),
    GroupConfig(initial_rebalance_delay_ms=3_000, max_size=2),
)

#: How long any parked request may wait, by the clock: well past every chain of deadlines a schedule can arm
#: (the initial delay up to a rebalance timeout, the 5-minute new-member timeout, a rebalance and a sync phase).
PATIENCE_MS = 2 * (300_000 + 3 * max(REBALANCE_CHOICES_MS) + max(SESSION_CHOICES_MS))

TOPIC = "topic"
PARTITIONS = 50  # __consumer_offsets: groups "a" and "b" hash to two of them


class InvariantViolation(AssertionError):
    """One of Kafka's invariants did not hold after a step."""


@dataclass
class SimClient:
    slot: int
    group_id: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: tuple[str, ...] = ()
    waiting: Deferred[Any] | None = None
    epoch: int = 0  # a restart abandons what the previous process waited for
    synced: int = -1  # the generation of its last assignment
    rejoin: bool = True  # told to rejoin (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, ...) or never joined


@dataclass
class Parked:
    """A request the coordinator parked: it must be answered, or held by a member the coordinator still has."""

    answer: Deferred[Any]
    kind: str  # "join" | "sync"
    group_id: str
    since_ms: int


@dataclass
class JoinAnswer:
    group_id: str
    incarnation: int
    result: JoinResult


@dataclass
class SyncAnswer:
    group_id: str
    incarnation: int
    member_id: str
    generation: int
    result: SyncResult


class Recorder:
    """The coordinator's event stream, kept for the invariants (``GroupEvents``)."""

    wants_debug = False

    def __init__(self, world: World) -> None:
        self._world = world

    def emit(self, event: str, group_id: str, fields: dict[str, Any], *, debug: bool = False) -> None:
        self._world.on_event(event, group_id, fields)


@dataclass
class World:
    config: GroupConfig
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_700_000_000_000))
    trace: bool = False

    def __post_init__(self) -> None:
        self.purgatory = Purgatory(self.clock)
        self.clock.attach(self.purgatory)
        ids = itertools.count(1)
        quiet = structlog.wrap_logger(
            structlog.ReturnLogger(), wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL)
        )
        # Issue 27: every durable change, replayed into a fresh coordinator at the end (``check_replay``).
        self.changes = MemoryChanges()
        self.coordinator = GroupCoordinator(
            self.config,
            self.clock,
            self.purgatory,
            new_uuid=lambda: f"u{next(ids)}",
            log=quiet,
            events=Recorder(self),
            changes=self.changes,
        )
        self.clients = [
            SimClient(slot, group_of(slot), f"static-{slot}" if slot in STATIC_CLIENTS else None)
            for slot in range(CLIENTS)
        ]
        self.parked: list[Parked] = []
        self.violations: list[str] = []
        # What the invariants compare against, filled as answers and events arrive.
        self.incarnation: dict[str, int] = {}  # group id -> how many times it was created
        self.last_state: dict[str, str] = {}
        self.renamed: dict[str, str] = {}  # a static member's old member id -> the new one
        self.join_answers: list[JoinAnswer] = []
        self.sync_answers: list[SyncAnswer] = []
        self.generation_view: dict[tuple[str, int, int], tuple[str, str | None, str | None]] = {}
        self.sent_assignments: dict[tuple[str, int, int], list[dict[str, bytes]]] = {}
        self.stored_assignments: dict[tuple[str, int, int], dict[str, bytes]] = {}
        self.newly_stored: list[tuple[str, int, int]] = []
        self.generations: dict[tuple[str, int], int] = {}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self._offset_values = itertools.count(1)
        self.deleting: str | None = None
        self.moving = False  # a coordinator move reloads groups: not transitions of the state table

    # -- running -----------------------------------------------------------------------------------------------

    def run(self, schedule: Iterable[Step]) -> None:
        for number, step in enumerate(schedule):
            if self.trace:
                print(f"step {number}: {step!r}")
            self.apply(step)
            invariants.check(self, f"after step {number} ({step!r})")
        invariants.check_replay(self, "after the last step")
        self.drain()
        invariants.check_replay(self, "after the quiet period")

    def drain(self) -> None:
        """Nothing more is sent; time passes until every deadline has had its say. All must be answered."""
        self.clock.advance(PATIENCE_MS)
        invariants.check(self, "after the quiet period")
        invariants.check_quiet(self)

    def apply(self, step: Step) -> None:
        match step:
            case Poll(client=slot):
                self.poll(self.clients[slot])
            case Round(group=index):
                for client in self.clients:
                    if client.group_id == GROUPS[index]:
                        self.poll(client)
            case Join():
                self.join(step)
            case Sync():
                self.sync(step)
            case Heartbeat(client=slot):
                self.heartbeat(self.clients[slot])
            case Leave():
                self.leave(step)
            case Commit():
                self.commit(step)
            case Restart(client=slot):
                client = self.clients[slot]
                client.epoch += 1
                client.waiting = None  # still in self.parked: the coordinator must answer it anyway
                client.member_id, client.generation, client.leader, client.members = "", -1, "", ()
                client.rejoin = True
            case Kick(client=slot):
                client = self.clients[slot]
                with contextlib.suppress(UnknownTarget):
                    self.coordinator.kick(client.group_id, client.member_id)
            case Fence(client=slot):
                client = self.clients[slot]
                if client.instance_id is not None:
                    with contextlib.suppress(UnknownTarget):
                        self.coordinator.fence(client.group_id, client.instance_id)
            case ForceRebalance(group=index):
                with contextlib.suppress(Conflict, UnknownTarget):
                    self.coordinator.force_rebalance(GROUPS[index])
            case DeleteGroup(group=index):
                group_id = GROUPS[index]
                self.deleting = group_id  # DeleteGroups takes the offsets with the group, as in Kafka
                ((_, error),) = self.coordinator.delete_groups([group_id])
                self.deleting = None
                if error is E.none:
                    self.offsets.pop(group_id, None)
            case MoveCoordinator(group=index):
                self.move(GROUPS[index])
            case Advance(choice=choice):
                self.clock.advance(ADVANCE_CHOICES_MS[choice])

    def move(self, group_id: str) -> None:
        """Kafka's unload and load of the group's partition. What the group is afterwards is a new incarnation (Kafka
        replays a new group object), which carries the stored assignment of the generation it is back at."""
        before = self.incarnation.get(group_id, 0)
        self.moving = True
        try:
            self.coordinator.coordinators_moved({partition_for(group_id, PARTITIONS)}, PARTITIONS)
        finally:
            self.moving = False
        group = self.coordinator.groups.get(group_id)
        if group is None or self.incarnation.get(group_id, 0) != before:
            return  # forgotten (no record, no offsets): the next JoinGroup creates it anew
        self.incarnation[group_id] = before + 1
        stored = self.stored_assignments.get((group_id, before, group.generation_id))
        if stored is not None:
            self.stored_assignments[(group_id, before + 1, group.generation_id)] = stored

    # -- what a client sends -----------------------------------------------------------------------------------

    def poll(self, client: SimClient) -> None:
        if client.waiting is not None:
            return
        if client.rejoin or not client.member_id:
            self.join(Join(client.slot))
        elif client.synced != client.generation:
            self.sync(Sync(client.slot))
        else:
            self.heartbeat(client)

    def join(self, step: Join) -> None:
        client = self.clients[step.client]
        if client.waiting is not None:
            return  # its connection is muted until the parked answer comes
        names = PROTOCOL_CHOICES[step.protocols]
        version = max(step.version, 5) if client.instance_id is not None else step.version
        request = JoinRequest(
            group_id=client.group_id,
            member_id=client.member_id,
            session_timeout_ms=SESSION_CHOICES_MS[step.session],
            rebalance_timeout_ms=REBALANCE_CHOICES_MS[step.rebalance],
            protocol_type="consumer",
            # The metadata differs per entry, so a repeated name's first entry is told apart from the others.
            protocols=tuple((name, subscription(TOPIC, f"{name}-{i}")) for i, name in enumerate(names)),
            group_instance_id=client.instance_id,
            api_version=version,
            client=Client(f"client-{client.slot}", "/127.0.0.1"),
        )
        answer = self.coordinator.join(request)
        self._park(client, answer, "join")
        epoch = client.epoch
        answer.add_done_callback(lambda result: self._joined(client, epoch, result))

    def _joined(self, client: SimClient, epoch: int, result: JoinResult) -> None:
        self.join_answers.append(JoinAnswer(client.group_id, self.incarnation.get(client.group_id, 0), result))
        if epoch != client.epoch:
            return  # abandoned by a restart: nobody reads it
        client.waiting = None
        error = result.error
        client.rejoin = error is not E.none
        if error is E.none:
            client.member_id, client.generation, client.leader = result.member_id, result.generation_id, result.leader
            client.members = tuple(member.member_id for member in result.members)
        elif error is E.member_id_required:
            client.member_id = result.member_id
        elif error in (E.unknown_member_id, E.fenced_instance_id):
            client.member_id, client.generation = "", -1

    def sync(self, step: Sync) -> None:
        client = self.clients[step.client]
        if client.waiting is not None:
            return
        generation = client.generation - 1 if step.stale else client.generation
        assignments: dict[str, bytes] = {}
        if client.member_id and client.leader == client.member_id:
            omitted = client.members[step.omit % len(client.members)] if step.omit >= 0 and client.members else None
            assignments = {m: f"{m}@{generation}".encode() for m in client.members if m != omitted}
            key = (client.group_id, self.incarnation.get(client.group_id, 0), generation)
            self.sent_assignments.setdefault(key, []).append(assignments)
        request = SyncRequest(
            group_id=client.group_id,
            generation_id=generation,
            member_id=client.member_id,
            assignments=tuple(assignments.items()),
            group_instance_id=client.instance_id,
            protocol_type="consumer",
        )
        answer = self.coordinator.sync(request)
        self._park(client, answer, "sync")
        member_id, epoch = client.member_id, client.epoch
        answer.add_done_callback(lambda result: self._synced(client, epoch, member_id, generation, result))

    def _synced(self, client: SimClient, epoch: int, member_id: str, generation: int, result: SyncResult) -> None:
        incarnation = self.incarnation.get(client.group_id, 0)
        self.sync_answers.append(SyncAnswer(client.group_id, incarnation, member_id, generation, result))
        if epoch != client.epoch:
            return
        client.waiting = None
        if result.error is E.none:
            client.synced = generation
        else:
            client.rejoin = True
        if result.error in (E.unknown_member_id, E.fenced_instance_id):
            client.member_id, client.generation = "", -1

    def _park(self, client: SimClient, answer: Deferred[Any], kind: str) -> None:
        if not answer.done:
            client.waiting = answer
            self.parked.append(Parked(answer, kind, client.group_id, self.clock.now_ms()))

    def heartbeat(self, client: SimClient) -> None:
        if client.waiting is not None:
            return
        error = self.coordinator.heartbeat(client.group_id, client.generation, client.member_id, client.instance_id)
        invariants.check_heartbeat(self, client, error)
        if error is not E.none:
            client.rejoin = True
        if error in (E.unknown_member_id, E.fenced_instance_id):
            client.member_id, client.generation = "", -1

    def leave(self, step: Leave) -> None:
        client = self.clients[step.client]
        if client.waiting is not None and not step.elsewhere:
            return
        if step.by_instance and client.instance_id is not None:
            identity = LeavingMember("", client.instance_id)
        else:
            identity = LeavingMember(client.member_id, client.instance_id)
        result = self.coordinator.leave(client.group_id, [identity])
        if result.error is not E.none:
            self.violations.append(f"LeaveGroup answered {result.error.name}")
        if not step.elsewhere:
            client.member_id, client.generation, client.leader, client.members = "", -1, "", ()
            client.rejoin = True

    def commit(self, step: Commit) -> None:
        client = self.clients[step.client]
        if client.waiting is not None:
            return
        offset = next(self._offset_values)
        partition = client.slot % 3
        simple = step.simple or not client.member_id
        request = CommitRequest(
            group_id=client.group_id,
            topics=((TOPIC, (PartitionCommit(partition, offset),)),),
            generation_id=-1 if simple else client.generation,
            member_id="" if simple else client.member_id,
            group_instance_id=None if simple else client.instance_id,
        )
        ((_, ((_, error),)),) = self.coordinator.commit_offsets(request)
        if error is E.none:
            self.offsets.setdefault(client.group_id, {})[(TOPIC, partition)] = offset

    # -- what the coordinator says -----------------------------------------------------------------------------

    def on_event(self, event: str, group_id: str, fields: dict[str, Any]) -> None:
        if event == "group_created":
            self.incarnation[group_id] = self.incarnation.get(group_id, 0) + 1
            self.last_state[group_id] = "Empty"
        elif event == "state_changed":
            if not self.moving:
                invariants.check_transition(self, group_id, fields["from"], fields["to"])
            elif self.last_state.get(group_id) != fields["from"]:
                self.violations.append(f"group {group_id}: reloaded from {fields['from']}, but it was elsewhere")
            self.last_state[group_id] = fields["to"]
        elif event == "sync_completed":
            # The leader's assignment was just stored and the group is Stable: what every member is told from now.
            group = self.coordinator.groups[group_id]
            key = (group_id, self.incarnation.get(group_id, 0), group.generation_id)
            self.stored_assignments[key] = {member_id: m.assignment for member_id, m in group.members.items()}
            self.newly_stored.append(key)
        elif event == "member_fenced":
            self.renamed[fields["member_id"]] = fields["new_member_id"]
        elif event == "group_deleted" and self.offsets.get(group_id) and group_id != self.deleting:
            self.violations.append(f"group {group_id} deleted with committed offsets: {fields['reason']}")

    def resolve(self, member_id: str) -> str:
        """The member id a static member goes by now, following every replacement since ``member_id``."""
        seen = 0
        while member_id in self.renamed and seen < 1000:
            member_id = self.renamed[member_id]
            seen += 1
        return member_id


def replay(config: int, schedule: Sequence[Step], *, trace: bool = True) -> World:
    """Run one schedule (as a failure printed it), tracing each step; raises InvariantViolation if one breaks."""
    world = World(CONFIGS[config], trace=trace)
    world.run(schedule)
    return world
