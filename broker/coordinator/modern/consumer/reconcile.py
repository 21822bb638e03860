"""Moving one member a step toward its target (Kafka's ``CurrentAssignmentBuilder``, section 5).

A pure function of the member, its target and what it reports owning: the heartbeat handler applies the result.
Revocation comes before assignment: a member first gives up what it should no longer own (its epoch waits), and a
partition is handed to it only once no other member owns it or has it pending revocation. Kafka 4.0 semantics with
the 4.2 fix KAFKA-19974 (leaving UNREVOKED_PARTITIONS does not add one to the epoch), as the spec recommends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.coordinator.modern.types import EMPTY_ASSIGNMENT, Assignment, MemberState, TopicId

__all__ = ["FencedMemberEpoch", "Reconciled", "reconcile"]


class FencedMemberEpoch(Exception):
    """An UNKNOWN-state member that reports owning partitions must rejoin (section 5.1, last rows)."""


@dataclass(frozen=True, slots=True)
class Reconciled:
    """The member's assignment state after this heartbeat (equal to the input when nothing moved)."""

    state: MemberState
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    current: Reconciled,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owned_by_other: Callable[[TopicId, int], bool],
) -> Reconciled:
    """Section 5.1's state machine. ``owned`` is what the member reported (None: unknown, so still owning
    everything); ``owned_by_other(topic, partition)`` says whether another member holds the partition, assigned or
    pending revocation."""
    state = current.state
    if state is MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, current.member_epoch, target_epoch, target, owned, owned_by_other)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, current.pending_revocation):
            return current
        # KAFKA-19974 (4.2): from the member's own epoch, not epoch + 1.
        return _next(current, current.member_epoch, target_epoch, target, owned, owned_by_other)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(current, current.member_epoch, target_epoch, target, owned, owned_by_other)
    if owned is None or any(owned.values()):
        raise FencedMemberEpoch
    return _next(current, target_epoch, target_epoch, target, owned, owned_by_other)


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & partitions for topic_id, partitions in revoking.items())


def _next(
    current: Reconciled,
    base_epoch: int,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owned_by_other: Callable[[TopicId, int], bool],
) -> Reconciled:
    """Kafka's computeNextAssignment: keep, revoke, then the new partitions that are free."""
    assigned = current.assigned
    keep: dict[TopicId, frozenset[int]] = {}
    revoke: dict[TopicId, frozenset[int]] = {}
    new: dict[TopicId, frozenset[int]] = {}
    unreleased = False
    for topic_id in assigned.keys() | target.keys():
        mine = assigned.get(topic_id, frozenset())
        wanted = target.get(topic_id, frozenset())
        kept = mine & wanted
        if kept:
            keep[topic_id] = kept
        if mine - kept:
            revoke[topic_id] = mine - kept
        candidates = wanted - kept
        if candidates:
            free = frozenset(p for p in candidates if not owned_by_other(topic_id, p))
            if len(free) != len(candidates):
                unreleased = True
            if free:
                new[topic_id] = free
    if revoke and _still_owns(owned, revoke):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, base_epoch, _previous(current, base_epoch), keep, revoke)
    if new:
        merged = dict(keep)
        for topic_id, partitions in new.items():
            merged[topic_id] = merged.get(topic_id, frozenset()) | partitions
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return Reconciled(state, target_epoch, _previous(current, target_epoch), merged, EMPTY_ASSIGNMENT)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(state, target_epoch, _previous(current, target_epoch), keep, EMPTY_ASSIGNMENT)


def _previous(current: Reconciled, epoch: int) -> int:
    """The previous epoch moves only when the epoch value changes (section 5.1)."""
    return current.member_epoch if epoch != current.member_epoch else current.previous_member_epoch
