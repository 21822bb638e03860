"""The ``uniform`` server-side assignor, the default (section 6.4 of ``docs/spec/consumer-groups.md``).

Kafka's ``UniformAssignor`` with its two builders, ``UniformHomogeneousAssignmentBuilder`` (every member subscribes
to the same topics) and ``UniformHeterogeneousAssignmentBuilder`` (they do not). Balance comes first, stickiness
second: a member keeps what it can of its current *target* (section 6.1), and only the surplus moves.

Kafka iterates hash maps (members, topic ids), so its placements are not reproducible; here members are walked in
the spec's order and topics in sorted id order, so one spec always gives one answer (section 6.4, last paragraph:
tests assert properties, and ours may also assert exact placements).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from fractions import Fraction

from broker.coordinator.modern.assignors.base import AssignorError, GroupSpec, MemberSpec
from broker.coordinator.modern.types import Assignment, TopicId

# Section 6.4, heterogeneous step 3: Kafka bounds the balancing loop; each move strictly lowers the sum of squared
# member sizes, so the loop ends anyway, the bound only caps the time a pathological group can take.
MAX_BALANCE_PASSES = 16


class UniformAssignor:
    """Kafka's ``UniformAssignor``: the homogeneous builder when the group is homogeneous (section 6.3), the
    heterogeneous one otherwise."""

    name = "uniform"

    def assign(self, spec: GroupSpec) -> dict[str, Assignment]:
        check_topics_known(spec)
        if not spec.members:
            return {}
        first = spec.members[0].topics
        # The group says homogeneous by topic *names* (section 6.3); the member specs hold the ids of the topics that
        # exist, which are then equal too. Checking costs one pass and keeps a caller's mistake from handing a member
        # partitions of a topic it does not subscribe to: such a group is assigned as the heterogeneous one it is.
        if spec.homogeneous and all(member.topics == first for member in spec.members):
            return _assign_homogeneous(spec, sorted(first))
        return _assign_heterogeneous(spec)


def check_topics_known(spec: GroupSpec) -> None:
    """Section 6.6: a member subscribed to a topic without a partition count is an assignor failure, never guessed
    around (Kafka's ``PartitionAssignorException``: "Members are subscribed to topic ... which doesn't exist")."""
    checked: set[int] = set()  # members with one subscription usually share one topic set: check each set once
    for member in spec.members:
        if id(member.topics) in checked:
            continue
        checked.add(id(member.topics))
        for topic_id in member.topics:
            if topic_id not in spec.partition_counts:
                raise AssignorError(
                    f"member {member.member_id} is subscribed to topic {topic_id} which has no partition count"
                )


def _valid_current(
    member: MemberSpec, counts: dict[TopicId, int], taken: dict[TopicId, set[int]]
) -> list[tuple[TopicId, int]]:
    """The member's current target that is still assignable to it, in (topic id, partition) order: topics it still
    subscribes to, partitions that still exist, and none that an earlier member already claimed (targets are
    disjoint in a healthy group; the first member in spec order wins if they are not). Claims go into ``taken``."""
    kept: list[tuple[TopicId, int]] = []
    for topic_id in sorted(member.target):
        if topic_id not in member.topics:
            continue
        count = counts[topic_id]
        claimed = taken.setdefault(topic_id, set())
        for partition in sorted(member.target[topic_id]):
            if 0 <= partition < count and partition not in claimed:
                claimed.add(partition)
                kept.append((topic_id, partition))
    return kept


def _assign_homogeneous(spec: GroupSpec, topics: Sequence[TopicId]) -> dict[str, Assignment]:
    """Section 6.4, homogeneous case (Kafka's ``UniformHomogeneousAssignmentBuilder``).

    Every member may take every partition, so the target is exact: total = q * N + x, x members hold q + 1 and the
    others q. The extra slots go first to the members that already hold more than q (in spec order), so as few
    partitions move as possible; extras nobody can fill from its current target go to the last members in spec
    order, as Kafka's builder hands them to "the last members that must take one".

    This runs for every heartbeat that finds the group epoch ahead, so it works on topic *positions* (ints) rather
    than topic ids (a Uuid hashes in Python code), and a member whose target does not change gets its current
    target object back, which the caller then recognises without comparing partitions.
    """
    members = spec.members
    if not topics:
        return {member.member_id: {} for member in members}
    position = {topic_id: index for index, topic_id in enumerate(topics)}
    counts = [spec.partition_counts[topic_id] for topic_id in topics]
    total = sum(counts)
    quota, extras = divmod(total, len(members))

    # Each member's current target still assignable to it, in (topic, partition) order; the first member in spec
    # order wins a partition two targets claim (never in a healthy group). ``whole`` marks targets kept entirely.
    taken: list[set[int]] = [set() for _ in topics]
    current: list[list[tuple[int, int]]] = []
    whole: list[bool] = []
    for member in members:
        kept: list[tuple[int, int]] = []
        intact = True
        target = member.target
        for topic_id in sorted(target) if len(target) > 1 else target:
            index = position.get(topic_id)
            if index is None:
                intact = False
                continue
            count = counts[index]
            claimed = taken[index]
            for partition in sorted(target[topic_id]):
                if 0 <= partition < count and partition not in claimed:
                    claimed.add(partition)
                    kept.append((index, partition))
                else:
                    intact = False
        current.append(kept)
        whole.append(intact)

    quotas = [quota] * len(members)
    for index, kept in enumerate(current):
        if extras == 0:
            break
        if len(kept) > quota:
            quotas[index] += 1
            extras -= 1
    for index in range(len(members) - 1, -1, -1):
        if extras == 0:
            break
        if quotas[index] == quota:
            quotas[index] += 1
            extras -= 1

    # Each member keeps the first `quota` partitions of its current target; everything else is unassigned.
    assigned: list[set[int]] = [set() for _ in topics]
    for index, kept in enumerate(current):
        if len(kept) > quotas[index]:
            del kept[quotas[index] :]
            whole[index] = False
        for topic, partition in kept:
            assigned[topic].add(partition)

    # Hand the unassigned partitions out in (topic id, partition) order, each member taking a contiguous run up to its
    # quota, so a newcomer's partitions are neighbours (Kafka hands out its unassigned list the same way).
    unassigned = [
        (topic, partition)
        for topic, count in enumerate(counts)
        for partition in range(count)
        if partition not in assigned[topic]
    ]
    cursor = 0
    result: dict[str, Assignment] = {}
    for index, member in enumerate(members):
        kept = current[index]
        room = quotas[index] - len(kept)
        if room > 0:
            kept.extend(unassigned[cursor : cursor + room])
            cursor += room
            whole[index] = False
        if whole[index]:
            result[member.member_id] = member.target
            continue
        by_topic: dict[int, list[int]] = {}
        for topic, partition in kept:
            by_topic.setdefault(topic, []).append(partition)
        result[member.member_id] = {topics[topic]: frozenset(partitions) for topic, partitions in by_topic.items()}
    if cursor != len(unassigned):
        # Section 6.6: quotas always add up to the total; reaching this is a bug, reported as Kafka reports it.
        raise AssignorError("uniform assignor left partitions unassigned")
    return result


class _Heterogeneous:
    """Section 6.4, heterogeneous case (Kafka's ``UniformHeterogeneousAssignmentBuilder``): members are numbered by
    their position in the spec, which breaks every tie."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.members = spec.members
        self.topics = sorted({topic_id for member in spec.members for topic_id in member.topics})
        self.counts = {topic_id: spec.partition_counts[topic_id] for topic_id in self.topics}
        self.subscribers: dict[TopicId, list[int]] = {topic_id: [] for topic_id in self.topics}
        for index, member in enumerate(self.members):
            for topic_id in member.topics:
                self.subscribers[topic_id].append(index)  # ascending: members are walked in order
        # owned[i][t]: the partitions of topic t member i holds; load[i]: how many partitions member i holds in all.
        self.owned: list[dict[TopicId, set[int]]] = [{} for _ in self.members]
        self.load = [0] * len(self.members)
        # The partitions kept from current targets, by topic (step 1).
        self.taken: dict[TopicId, set[int]] = {}
        self.order = self._topic_order()

    def build(self) -> dict[str, Assignment]:
        self._keep_current()
        self._assign_unassigned()
        self._balance()
        return {
            member.member_id: {
                topic_id: frozenset(partitions) for topic_id, partitions in sorted(owned.items()) if partitions
            }
            for member, owned in zip(self.members, self.owned, strict=True)
        }

    def _add(self, index: int, topic_id: TopicId, partition: int) -> None:
        self.owned[index].setdefault(topic_id, set()).add(partition)
        self.load[index] += 1

    def _keep_current(self) -> None:
        # Step 1: every member keeps its whole current target within its subscription; balancing trims it later.
        for index, member in enumerate(self.members):
            for topic_id, partition in _valid_current(member, self.counts, self.taken):
                self._add(index, topic_id, partition)

    def _topic_order(self) -> list[TopicId]:
        # Step 2's order: partitions per subscriber descending, then fewer subscribers first, then topic id. Exact
        # fractions, so two topics of equal ratio compare equal and fall through to the next key.
        def key(topic_id: TopicId) -> tuple[Fraction, int, TopicId]:
            subscribers = len(self.subscribers[topic_id])
            return (-Fraction(self.counts[topic_id], subscribers), subscribers, topic_id)

        return sorted(self.topics, key=key)

    def _assign_unassigned(self) -> None:
        # Step 2: each unassigned partition to the subscriber of its topic holding the fewest partitions overall
        # (ties: lowest member index). Only the topic's own subscribers change load meanwhile, so one heap per topic.
        for topic_id in self.order:
            claimed = self.taken.get(topic_id, set())
            free = [partition for partition in range(self.counts[topic_id]) if partition not in claimed]
            if not free:
                continue
            heap = [(self.load[index], index) for index in self.subscribers[topic_id]]
            heapq.heapify(heap)
            for partition in free:
                load, index = heapq.heappop(heap)
                self._add(index, topic_id, partition)
                heapq.heappush(heap, (load + 1, index))

    def _balance(self) -> None:
        # Step 3: within each topic shared by two or more members, move partitions from its most loaded owner to its
        # least loaded subscriber while their sizes differ by 2 or more; repeat the pass until nothing moves.
        shared = [
            topic_id for topic_id in self.order if len(self.subscribers[topic_id]) >= 2 and self.counts[topic_id] > 0
        ]
        for _ in range(MAX_BALANCE_PASSES):
            moved = False
            for topic_id in shared:
                moved |= self._balance_topic(topic_id)
            if not moved:
                return

    def _balance_topic(self, topic_id: TopicId) -> bool:
        """Moves within one topic until its most loaded owner is at most one above its least loaded subscriber.

        Two heaps with lazy deletion (an entry is current while its load matches), so a lopsided group of a
        thousand members costs a logarithm per move, not a scan. Only this topic's subscribers change load here.
        The least loaded size never drops (a giver ends at least one above the receiver), so a member that received
        is never the one to give afterwards: a giver's partitions are sorted once and popped from the top.
        """
        load = self.load
        owned = self.owned
        subscribers = self.subscribers[topic_id]
        # Least loaded subscriber first, ties to the lowest index; most loaded owner first, ties to the highest index
        # (the member latest in spec order gives, so earlier members stay put).
        least_heap = [(load[index], index) for index in subscribers]
        most_heap = [(-load[index], -index) for index in subscribers if owned[index].get(topic_id)]
        heapq.heapify(least_heap)
        heapq.heapify(most_heap)
        descending: dict[int, list[int]] = {}
        moved = False
        while most_heap:
            negative_load, negative_index = most_heap[0]
            most = -negative_index
            if -negative_load != load[most] or not owned[most].get(topic_id):
                heapq.heappop(most_heap)
                continue
            while least_heap[0][0] != load[least_heap[0][1]]:
                heapq.heappop(least_heap)
            least = least_heap[0][1]
            if load[most] - load[least] < 2:
                return moved
            heapq.heappop(most_heap)
            heapq.heappop(least_heap)
            # The highest-numbered partition moves: the lower ones, where a range starts, stay with their owner.
            if most not in descending:
                descending[most] = sorted(owned[most][topic_id])
            partition = descending[most].pop()
            owned[most][topic_id].discard(partition)
            load[most] -= 1
            descending.pop(least, None)
            self._add(least, topic_id, partition)
            heapq.heappush(least_heap, (load[least], least))
            heapq.heappush(least_heap, (load[most], most))
            heapq.heappush(most_heap, (-load[least], -least))
            if owned[most][topic_id]:
                heapq.heappush(most_heap, (-load[most], -most))
            moved = True
        return moved


def _assign_heterogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    return _Heterogeneous(spec).build()
