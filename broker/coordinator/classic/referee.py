"""The assignment referee: judges one generation of a ``consumer``-protocol group.

Pure and read-only: it decodes what the leader's SyncGroup carried and what the members
subscribed to, and reports double owners, unowned partitions, assignments to non-members and
the partitions that changed hands since the previous generation. It never changes what the
broker answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.coordinator.consumer_protocol import (
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
)
from broker.events.names import DOUBLE_OWNER, UNKNOWN_MEMBER, UNOWNED

__all__ = ["COOPERATIVE_PROTOCOLS", "Move", "TopicPartitions", "Verdict", "Violation", "judge"]

TopicPartitions = dict[str, list[int]]  # topic -> sorted partitions

#: Assignors that revoke before they reassign (KIP-429): a partition may be unowned for one generation.
COOPERATIVE_PROTOCOLS = frozenset({"cooperative-sticky"})


_Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # "double_owner" | "unowned" | "unknown_member"
    topic: str | None
    partition: int | None
    # double_owner: the owners; unknown_member: the non-member id named by the leader; unowned: ()
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    from_member: str | None  # owner in the previous generation (None: nobody)
    to_member: str | None  # owner now (None: nobody)


@dataclass(frozen=True, slots=True)
class Verdict:
    assignments: dict[str, TopicPartitions]  # every current member -> its decoded partitions (left out: {})
    moved: tuple[Move, ...]  # partitions whose owner differs from `previous` (sorted by topic, partition)
    unowned: int  # subscribed partitions nobody owns now
    violations: tuple[Violation, ...]


def judge(
    leader_assignments: Sequence[tuple[str, bytes]],
    members: Mapping[str, bytes],
    previous: Mapping[str, TopicPartitions] | None,
    partition_count: Callable[[str], int | None],
    cooperative: bool,
) -> Verdict | None:
    """Judge the assignment the leader sent for the current generation.

    ``leader_assignments`` is exactly what the leader's SyncGroup carried, in order (it may name
    non-members; for a repeated member id the last entry wins). ``members`` maps each current
    member to its subscription metadata for the chosen protocol; ``previous`` is the previous
    verdict's ``assignments`` (None for the first generation); ``partition_count`` gives a
    topic's partition count or None when it does not exist; ``cooperative`` says the chosen
    protocol rebalances cooperatively (KIP-429).

    Returns None when any assignment or subscription is not the consumer protocol.
    """
    try:
        subscriptions = {member_id: decode_subscription(metadata) for member_id, metadata in members.items()}
        decoded = {member_id: _by_topic(raw) for member_id, raw in dict(leader_assignments).items()}
    except ConsumerProtocolError:
        return None

    violations: list[Violation] = []
    assignments: dict[str, TopicPartitions] = {}
    owners: dict[_Partition, str] = {}
    doubles: dict[_Partition, set[str]] = {}
    for member_id, partitions in decoded.items():
        if member_id not in subscriptions:
            violations.append(Violation(UNKNOWN_MEMBER, None, None, (member_id,)))
            continue
        assignments[member_id] = partitions
        for topic, ids in partitions.items():
            for partition in ids:
                key = (topic, partition)
                owner = owners.setdefault(key, member_id)
                if owner != member_id:
                    doubles.setdefault(key, {owner}).add(member_id)
    for member_id in subscriptions:
        assignments.setdefault(member_id, {})
    # Members in their join order, each with its topics in name order.
    assignments = {member_id: assignments[member_id] for member_id in subscriptions}

    violations.extend(
        Violation(DOUBLE_OWNER, topic, partition, tuple(sorted(names))) for (topic, partition), names in doubles.items()
    )

    revoking = _being_revoked(subscriptions.values()) if cooperative else set()
    unowned = 0
    for topic in sorted({topic for subscription in subscriptions.values() for topic in subscription.topics}):
        count = partition_count(topic)
        if count is None:
            continue
        for partition in range(count):
            key = (topic, partition)
            if key in owners:
                continue
            unowned += 1
            if key not in revoking:
                violations.append(Violation(UNOWNED, topic, partition, ()))

    violations.sort(key=_violation_order)
    moved = () if previous is None else _moves(_owner_sets(previous), owners, doubles)
    return Verdict(assignments, moved, unowned, tuple(violations))


#: Decoded assignments by their bytes (issue 17): the verdict's per-member partitions outlive it as the group's
#: view of its generation (``ClassicGroup.assignment_view``) and in the event buffers, ~300 B per member each
#: when decoded afresh. Equal bytes share one decoded value, which is therefore never mutated. Bounded by count
#: and bytes pinned, as ``classic.member.shared``; on overflow it starts over.
_decoded: dict[bytes, TopicPartitions] = {}
_decoded_size = 0
_DECODED_MAX = 65_536
_DECODED_MAX_BYTES = 4 * 1024 * 1024


def _by_topic(raw: bytes) -> TopicPartitions:
    """``decode_assignment(raw).by_topic()``, shared between equal ``raw`` (raises ConsumerProtocolError)."""
    global _decoded_size
    if type(raw) is not bytes:  # a bytearray or memoryview is no dict key
        raw = bytes(raw)
    known = _decoded.get(raw)
    if known is not None:
        return known
    partitions = decode_assignment(raw).by_topic()
    if len(_decoded) >= _DECODED_MAX or _decoded_size + len(raw) > _DECODED_MAX_BYTES:
        _decoded.clear()
        _decoded_size = 0
    _decoded[raw] = partitions
    _decoded_size += len(raw)
    return partitions


def _being_revoked(subscriptions: Iterable[Subscription]) -> set[_Partition]:
    """Partitions current members still own (KIP-429: unassigned now, reassigned next round)."""
    return {
        (topic, partition)
        for subscription in subscriptions
        for topic, partitions in subscription.owned_partitions
        for partition in partitions
    }


def _owner_sets(assignments: Mapping[str, TopicPartitions]) -> dict[_Partition, set[str]]:
    owners: dict[_Partition, set[str]] = {}
    for member_id, partitions in assignments.items():
        for topic, ids in partitions.items():
            for partition in ids:
                owners.setdefault((topic, partition), set()).add(member_id)
    return owners


def _moves(
    before: dict[_Partition, set[str]], owners: dict[_Partition, str], doubles: dict[_Partition, set[str]]
) -> tuple[Move, ...]:
    """Partitions whose owners changed; with several owners on a side, the ones that differ are named."""
    moves = []
    for key in before.keys() | owners.keys():
        old = before.get(key, set())
        new = doubles.get(key) or ({owners[key]} if key in owners else set())
        if old != new:
            moves.append(Move(key[0], key[1], _representative(old, new), _representative(new, old)))
    moves.sort(key=lambda move: (move.topic, move.partition))
    return tuple(moves)


def _representative(side: set[str], other: set[str]) -> str | None:
    """The smallest owner on ``side`` that is not on ``other`` (else the smallest on ``side``)."""
    if not side:
        return None
    return min(side - other or side)


def _violation_order(violation: Violation) -> tuple[str, str, int, tuple[str, ...]]:
    topic = "" if violation.topic is None else violation.topic
    partition = -1 if violation.partition is None else violation.partition
    return violation.kind, topic, partition, violation.members
