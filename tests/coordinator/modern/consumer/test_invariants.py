"""The invariants of section 5.1 of ``docs/spec/consumer-groups.md`` under random schedules (hypothesis, stateful).

Clients join (dynamic and static, by names and by regex), heartbeat with or without their ownership, apply the
assignments they receive at their own pace, lose responses (then send a full request, 5.5), change subscriptions,
leave (-1, and -2 for static members, who come back under the same or a new member id); time jumps fire session and
revocation timers; topics are created, grow and are deleted. After every step:

* a partition is in at most one member's assigned or pending revocation, and the group's ownership table agrees;
* targets are disjoint, and only hold partitions that exist;
* the group epoch and the assignment epoch never go down, and a member's epoch never goes down (until it leaves);
* a member gets partitions only at the target epoch (the epoch of the response that hands them out);
* the Assignment of an answer is exactly the member's assigned partitions, never one pending revocation;
* no heartbeat raised inside the coordinator and no timer failed.

At the end every client that wants to be in the group heartbeats until the group is Stable, which it must reach,
with every member holding exactly its target and every subscribed partition assigned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.coordinator.messages import ConsumerHeartbeatResult, TopicIdPartitions
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import MemberState, TopicId
from tests.coordinator.modern.consumer.harness import GROUP, INTERVAL_MS, ConsumerHarness, E

SUBSCRIPTIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("t",), ""),
    (("t", "u"), ""),
    (("u", "v"), ""),
    ((), "[uv]"),
    (("t",), "v.*"),
    ((), ""),
)
TOPICS = ("t", "u", "v")
REBALANCE_MS = 3_000
LOST = (E.unknown_member_id, E.fenced_member_epoch, E.group_id_not_found)

Held = dict[TopicId, set[int]]


def held(assignment: TopicIdPartitions | None) -> Held:
    return {topic_id: set(partitions) for topic_id, partitions in assignment or () if partitions}


def wire(partitions: Held) -> TopicIdPartitions:
    return tuple((topic_id, tuple(sorted(ps))) for topic_id, ps in partitions.items())


@dataclass
class Client:
    """What a client knows: the member id it uses, its epoch, the partitions it holds (and reports), the last
    assignment it was given, and whether it wants to be in the group at all."""

    name: str
    instance_id: str | None
    member_id: str
    names: tuple[str, ...] = ("t",)
    regex: str = ""
    joined: bool = False
    active: bool = False
    epoch: int = 0
    # By topic id, as the client holds them: a topic deleted (or re-created under a new id) stays what it was.
    owned: Held = field(default_factory=dict)
    given: Held = field(default_factory=dict)
    full_next: bool = False
    generation: int = 0


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ConsumerHarness(topics={"t": 4, "u": 2})
        self.clients = [
            Client("c0", None, "c0"),
            Client("c1", None, "c1"),
            Client("c2", None, "c2"),
            Client("s0", "i0", "s0-0"),
            Client("s1", "i1", "s1-0"),
        ]
        self.group_epochs = (0, 0)
        self.member_epochs: dict[str, int] = {}

    # -- helpers -------------------------------------------------------------------------------------------

    def _group(self) -> ConsumerGroup | None:
        return self.h.coordinator.consumer_groups.get(GROUP)

    def _send(
        self,
        client: Client,
        epoch: int,
        *,
        instance_id: str | None = None,
        rebalance_ms: int = -1,
        names: tuple[str, ...] | None = None,
        regex: str | None = None,
        owned: TopicIdPartitions | None = None,
    ) -> ConsumerHeartbeatResult:
        """One heartbeat with the checks of an answer (section 5.1's last two invariants)."""
        group = self._group()
        before: dict[TopicId, frozenset[int]] = {}
        if group is not None and client.member_id in group.members:
            before = dict(group.members[client.member_id].assigned)
        result = self.h.hb(
            client.member_id,
            epoch,
            instance_id=instance_id,
            rebalance_ms=rebalance_ms,
            names=names,
            regex=regex,
            owned=owned,
        )
        if result.error is not E.none or epoch < 0:
            return result
        group = self._group()
        assert group is not None
        member = group.members[client.member_id]
        assert result.member_epoch == member.member_epoch
        if result.assignment is not None:
            assert self.h.named(result.assignment) == self.h.named(member.assigned)
        for topic_id, partitions in member.pending_revocation.items():
            assert not partitions & member.assigned.get(topic_id, frozenset())
        gained = any(partitions - before.get(topic_id, frozenset()) for topic_id, partitions in member.assigned.items())
        if gained:
            assert member.member_epoch == group.assignment_epoch, (client.name, member.member_epoch)
        return result

    def _apply(self, client: Client, result: ConsumerHeartbeatResult, *, lost: bool = False) -> None:
        if result.error in LOST:
            client.joined, client.epoch, client.owned, client.given, client.full_next = False, 0, {}, {}, False
            return
        assert result.error is E.none, (client.name, result)
        if lost:
            client.full_next = True
            return
        client.full_next = False
        client.epoch = result.member_epoch
        if result.assignment is not None:
            client.given = held(result.assignment)

    def _join(self, client: Client) -> None:
        result = self._send(
            client,
            0,
            rebalance_ms=REBALANCE_MS,
            names=client.names,
            regex=client.regex,
            owned=(),
            instance_id=client.instance_id,
        )
        if result.error is E.unreleased_instance_id:
            assert client.instance_id is not None
            return
        assert result.error is E.none, (client.name, result)
        client.joined, client.active, client.owned, client.full_next = True, True, {}, False
        client.epoch = result.member_epoch
        client.given = held(result.assignment)

    def _heartbeat(self, client: Client, report: bool, lose: bool = False) -> None:
        if client.full_next:
            result = self._send(
                client,
                client.epoch,
                rebalance_ms=REBALANCE_MS,
                names=client.names,
                regex=client.regex,
                owned=wire(client.owned),
                instance_id=client.instance_id,
            )
        else:
            result = self._send(client, client.epoch, owned=wire(client.owned) if report else None)
        self._apply(client, result, lost=lose)

    # -- rules ---------------------------------------------------------------------------------------------

    @rule(index=st.integers(0, 4), subscription=st.sampled_from(SUBSCRIPTIONS), new_id=st.booleans())
    def join(self, index: int, subscription: tuple[tuple[str, ...], str], new_id: bool) -> None:
        client = self.clients[index]
        if client.joined:
            return
        client.names, client.regex = subscription
        if new_id and client.instance_id is not None:
            client.generation += 1
            client.member_id = f"{client.name}-{client.generation}"
        self._join(client)

    @rule(index=st.integers(0, 4), report=st.booleans(), lose=st.booleans())
    def heartbeat(self, index: int, report: bool, lose: bool) -> None:
        client = self.clients[index]
        if client.joined:
            self._heartbeat(client, report, lose and report)

    @rule(
        index=st.integers(0, 4),
        extra=st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 4)), max_size=3),
    )
    def heartbeat_claiming_more(self, index: int, extra: set[tuple[str, int]]) -> None:
        """Item 55: a report naming partitions the member was never given (some of them another member's) changes
        nothing but its own revocation."""
        client = self.clients[index]
        if not client.joined or client.full_next:
            return
        claimed: Held = {topic_id: set(partitions) for topic_id, partitions in client.owned.items()}
        for name, partition in extra:
            info = self.h.catalog.by_name(name)
            if info is not None:
                claimed.setdefault(info.topic_id, set()).add(partition)
        self._apply(client, self._send(client, client.epoch, owned=wire(claimed)))

    @rule(index=st.integers(0, 4))
    def reconcile(self, index: int) -> None:
        """The client applies the last assignment it was given (revokes and assigns)."""
        client = self.clients[index]
        client.owned = {topic_id: set(partitions) for topic_id, partitions in client.given.items()}

    @rule(index=st.integers(0, 4), subscription=st.sampled_from(SUBSCRIPTIONS))
    def subscribe(self, index: int, subscription: tuple[tuple[str, ...], str]) -> None:
        client = self.clients[index]
        if not client.joined or client.full_next:
            return
        client.names, client.regex = subscription
        self._apply(client, self._send(client, client.epoch, names=client.names, regex=client.regex))

    @rule(index=st.integers(0, 4), temporarily=st.booleans())
    def leave(self, index: int, temporarily: bool) -> None:
        client = self.clients[index]
        if not client.joined:
            return
        epoch = -2 if temporarily and client.instance_id is not None else -1
        result = self._send(client, epoch, instance_id=client.instance_id)
        assert result.error in (E.none, *LOST, E.fenced_instance_id), result
        client.joined, client.active, client.epoch, client.owned, client.given = False, False, 0, {}, {}

    @rule(ms=st.sampled_from([INTERVAL_MS, 1_000, 2_500, 4_000, 7_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)

    @rule(name=st.sampled_from(TOPICS), partitions=st.integers(1, 4))
    def topic_created_or_grown(self, name: str, partitions: int) -> None:
        info = self.h.catalog.by_name(name)
        if info is None:
            self.h.create_topic(name, partitions)
        elif partitions > info.partitions:
            self.h.add_partitions(name, partitions)

    @precondition(lambda self: len(list(self.h.catalog.names())) > 1)
    @rule(name=st.sampled_from(TOPICS))
    def topic_deleted(self, name: str) -> None:
        if self.h.catalog.by_name(name) is not None:
            self.h.delete_topic(name)

    # -- invariants ------------------------------------------------------------------------------------------

    @invariant()
    def ownership_and_epochs(self) -> None:
        assert self.h.coordinator.failed_operations == 0
        assert self.h.purgatory.failures == 0
        group = self._group()
        if group is None:
            self.group_epochs = (0, 0)
            self.member_epochs.clear()
            return
        self.h.check_ownership()
        epochs = (group.group_epoch, group.assignment_epoch)
        assert epochs[0] >= self.group_epochs[0] and epochs[1] >= self.group_epochs[1], (epochs, self.group_epochs)
        assert group.assignment_epoch <= group.group_epoch
        self.group_epochs = epochs
        targeted: set[tuple[TopicId, int]] = set()
        for member_id, target in group.targets.items():
            assert member_id in group.members
            for topic_id, partitions in target.items():
                info = self.h.catalog.by_id(topic_id)
                for partition in partitions:
                    assert (topic_id, partition) not in targeted
                    targeted.add((topic_id, partition))
                    if group.assignment_epoch == group.group_epoch and info is not None:
                        assert partition < info.partitions
        for member_id in list(self.member_epochs):
            if member_id not in group.members:
                del self.member_epochs[member_id]
        for member_id, member in group.members.items():
            if member.member_epoch < 0:
                self.member_epochs.pop(member_id, None)
                continue
            assert member.member_epoch >= self.member_epochs.get(member_id, 0), member_id
            self.member_epochs[member_id] = member.member_epoch
            # A member reaches the target epoch only once it holds nothing outside its target; a revoking member
            # stays below it.
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                assert member.member_epoch < group.assignment_epoch, member_id
            elif member.member_epoch == group.assignment_epoch:
                target = group.target_of(member_id)
                for topic_id, partitions in member.assigned.items():
                    assert partitions <= target.get(topic_id, frozenset()), member_id

    def teardown(self) -> None:
        """Everyone who wants in heartbeats (acknowledging what it was given) until the group is Stable."""
        clients = [c for c in self.clients if c.active]
        for _ in range(80):
            for client in clients:
                if not client.joined:
                    self._join(client)
                    continue
                client.owned = {topic_id: set(partitions) for topic_id, partitions in client.given.items()}
                self._heartbeat(client, report=True)
            self.ownership_and_epochs()
            group = self._group()
            if group is None or (group.state is ConsumerGroupState.STABLE and all(c.joined for c in clients)):
                break
            self.h.advance(INTERVAL_MS)
        group = self._group()
        if group is None or not clients:
            return
        assert group.state is ConsumerGroupState.STABLE, group.state
        subscribed: set[tuple[TopicId, int]] = set()
        for name in group.all_subscribed_names():
            info = self.h.catalog.by_name(name)
            if info is not None:
                subscribed |= {(info.topic_id, p) for p in range(info.partitions)}
        held: set[tuple[TopicId, int]] = set()
        for member in group.members.values():
            assert member.assigned == group.target_of(member.member_id)
            held |= {(t, p) for t, ps in member.assigned.items() for p in ps}
        if any(m.member_epoch >= 0 for m in group.members.values()):
            assert held == subscribed


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, derandomize=True, database=None
)
TestConsumerGroupInvariants = ConsumerGroupMachine.TestCase
