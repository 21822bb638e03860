"""The assignment referee of consumer groups: section 5.1's ownership invariants, checked as the group changes.

Read-only, like the classic groups' referee (``coordinator/classic/referee.py``): it reports, it never changes what
the broker answers. It checks two things of ``docs/spec/consumer-groups.md``:

* a partition is in at most one member's assigned or pending-revocation partitions at any time (section 5.1, the
  first invariant; section 3.5: Kafka's ``ConsumerGroup.addPartitionEpochs`` treats the contrary as an internal
  error), at every step that changes a member's partitions: a reconciliation, a departure, a static replacement;
* once the group is Stable (every member reconciled to the assignment epoch, section 3.4) every partition of the
  topics its members subscribe to, as the group last saw them (its subscription metadata, section 4.10), is
  assigned to someone.

It is told of those moments by the group's event log (``RefereedEventLog``): each of those events is emitted once
its change is made, so the referee sees the members as they now are. Checking every member at every reconciliation
would make a rebalance of N members cost N² steps, so the referee keeps its own index of who holds each partition
and looks only at what the changed member gained; a second owner found in the index is confirmed against that
member's actual partitions, so a stale index never yields a false report. When the group becomes Stable the whole
group is checked and the index rebuilt from the members themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinator.modern.consumer.events import ConsumerGroupEventLog
from broker.coordinator.modern.consumer.group import ConsumerGroup
from broker.coordinator.modern.consumer.member import ConsumerMember
from broker.coordinator.modern.consumer.state import ConsumerGroupState
from broker.coordinator.modern.types import TopicCatalog, TopicId
from broker.events import names
from broker.events.hub import GroupEvents
from broker.events.names import DOUBLE_OWNER, UNOWNED

__all__ = ["ConsumerReferee", "Finding", "RefereedEventLog", "holdings"]

Partition = tuple[TopicId, int]
_NOTHING: frozenset[Partition] = frozenset()
_NO_PARTITIONS: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # DOUBLE_OWNER or UNOWNED, the event format's names for both referees
    topic_id: TopicId
    partition: int
    members: tuple[str, ...]  # the owners, sorted (double_owner); () for unowned


def holdings(member: ConsumerMember) -> frozenset[Partition]:
    """Every partition the member owns or must still revoke (section 3.5: both count as owned)."""
    held = [(topic_id, p) for topic_id, partitions in member.assigned.items() for p in partitions]
    held += [(topic_id, p) for topic_id, partitions in member.pending_revocation.items() for p in partitions]
    return frozenset(held)


def _holds(group: ConsumerGroup, member_id: str, partition: Partition) -> bool:
    member = group.members.get(member_id)
    if member is None:
        return False
    topic_id, number = partition
    return number in member.assigned.get(topic_id, _NO_PARTITIONS) or number in member.pending_revocation.get(
        topic_id, _NO_PARTITIONS
    )


class _GroupIndex:
    """One group: partition -> the member last seen holding it, and what each member was last seen holding."""

    __slots__ = ("held", "seen")

    def __init__(self) -> None:
        self.held: dict[Partition, str] = {}
        self.seen: dict[str, frozenset[Partition]] = {}


class ConsumerReferee:
    """Judges the consumer groups' ownership; each call returns what it found."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupIndex] = {}

    def forget(self, group_id: str) -> None:
        """The group was created afresh or deleted: nothing of an earlier group of that id may linger."""
        self._groups.pop(group_id, None)

    def member_changed(self, group: ConsumerGroup, member_id: str) -> list[Finding]:
        """The member's partitions may have changed, or it left: the second owners of what it gained."""
        index = self._groups.get(group.group_id)
        if index is None:
            index = self._groups[group.group_id] = _GroupIndex()
        member = group.members.get(member_id)
        now = holdings(member) if member is not None else _NOTHING
        before = index.seen.get(member_id, _NOTHING)
        if now == before:
            return []
        held = index.held
        for partition in before - now:
            if held.get(partition) == member_id:
                del held[partition]
        found = []
        for partition in now - before:
            other = held.get(partition)
            if other is not None and other != member_id and _holds(group, other, partition):
                found.append(Finding(DOUBLE_OWNER, partition[0], partition[1], tuple(sorted((other, member_id)))))
            held[partition] = member_id
        if now:
            index.seen[member_id] = now
        else:
            index.seen.pop(member_id, None)
        return found

    def member_renamed(self, group: ConsumerGroup, old_id: str, new_id: str) -> None:
        """A static member's successor takes its partitions over under a new member id (section 4.7)."""
        index = self._groups.get(group.group_id)
        if index is None:
            return
        taken = index.seen.pop(old_id, _NOTHING)
        if taken:
            index.seen[new_id] = taken
        for partition in taken:
            if index.held.get(partition) == old_id:
                index.held[partition] = new_id

    def group_stable(self, group: ConsumerGroup) -> list[Finding]:
        """The whole group: no partition held twice, every subscribed partition held (sections 3.4, 4.10)."""
        index = self._groups[group.group_id] = _GroupIndex()
        owners: dict[Partition, list[str]] = {}
        for member_id, member in group.members.items():
            mine = holdings(member)
            if mine:
                index.seen[member_id] = mine
            for partition in mine:
                owners.setdefault(partition, []).append(member_id)
                index.held[partition] = member_id
        found = [
            Finding(DOUBLE_OWNER, partition[0], partition[1], tuple(sorted(ids)))
            for partition, ids in sorted(owners.items(), key=lambda item: (str(item[0][0]), item[0][1]))
            if len(ids) > 1
        ]
        # The topics the members subscribe to now, at the partition counts the group last saw (section 4.10: a
        # change is noticed at the next heartbeat). The metadata may still list a topic nobody subscribes to any more.
        metadata = group.subscription_metadata
        for name in sorted(group.all_subscribed_names() & metadata.keys()):
            topic_id, count = metadata[name]
            found.extend(Finding(UNOWNED, topic_id, p, ()) for p in range(count) if (topic_id, p) not in owners)
        return found


class RefereedEventLog(ConsumerGroupEventLog):
    """The consumer groups' event log with the referee watching.

    After each event that follows a change of some member's partitions, or the group turning Stable, the referee
    judges, and what it found is emitted as ``referee_violation`` right after that event (docs/events.md).
    """

    __slots__ = ("referee",)

    def __init__(self, hub: GroupEvents, topics: TopicCatalog) -> None:
        super().__init__(hub, topics)
        self.referee = ConsumerReferee()

    def _report(self, group: ConsumerGroup, found: list[Finding]) -> None:
        for finding in found:
            info = self._topics.by_id(finding.topic_id)
            fields = {
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "kind": finding.kind,
                "topic": info.name if info is not None else str(finding.topic_id),
                "partition": finding.partition,
                "members": list(finding.members),
            }
            self._emit(names.REFEREE_VIOLATION, group, fields)

    # -- the moments the referee judges ------------------------------------------------------------------

    def group_created(self, group: ConsumerGroup) -> None:
        self.referee.forget(group.group_id)
        super().group_created(group)

    def group_deleted(self, group: ConsumerGroup, reason: str) -> None:
        self.referee.forget(group.group_id)
        super().group_deleted(group, reason)

    def member_joined(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        super().member_joined(group, member)
        self._report(group, self.referee.member_changed(group, member.member_id))

    def member_reconciled(self, group: ConsumerGroup, member: ConsumerMember, previous_epoch: int) -> None:
        super().member_reconciled(group, member, previous_epoch)
        self._report(group, self.referee.member_changed(group, member.member_id))

    def member_left(self, group: ConsumerGroup, member: ConsumerMember, cause: str, reason: str) -> None:
        # Fenced: already removed, its partitions free. A static member's temporary leave (epoch -2, section 4.4)
        # keeps it with its assigned partitions and nothing pending.
        super().member_left(group, member, cause, reason)
        self._report(group, self.referee.member_changed(group, member.member_id))

    def member_fenced(self, group: ConsumerGroup, old: ConsumerMember, new_member_id: str, reason: str) -> None:
        super().member_fenced(group, old, new_member_id, reason)
        self.referee.member_renamed(group, old.member_id, new_member_id)

    def state_changed(self, group: ConsumerGroup, old: ConsumerGroupState, new: ConsumerGroupState) -> None:
        super().state_changed(group, old, new)
        if new is ConsumerGroupState.STABLE:
            self._report(group, self.referee.group_stable(group))
