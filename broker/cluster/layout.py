"""The nodes of a multi-node broker and who leads what: a pure state machine (no I/O; time from the caller).

Placement follows cluster-and-durability.md 4.5, as a one-process cluster does it: every node shares one store per
partition, so replicas are bookkeeping. Partition p of a topic with replication factor RF has the replicas
``nodes[(p + k) % N]`` for k < RF, the first one preferred; the leader is the first running replica, -1 when none
runs. Every change of leader raises the partition's leader epoch and records, at election time and before any new
record, that the new epoch starts at the log end offset (Partition.makeLeader's
``maybeAssignEpochStartOffset``): that is what makes OffsetForLeaderEpoch right after a move (4.4). The internal
topics ``__consumer_offsets`` and ``__transaction_state`` are placed the same way; a group's coordinator is the
leader of its partition (1.2), so moving a coordinator is moving that leader, with every key hashed there.

Leaderships are made on first use: a topic created while a node is down starts with the first running replica.
``stop`` makes every partition first, so that none the node led is missed. A topic CreateTopics made keeps its
replication factor (``add_topic``) until DeleteTopics forgets it; one made (or grown by CreatePartitions) with
manual replica assignments keeps exactly those replicas, in the order given, so that its leader is the first listed
running replica and a failover walks that order (ReplicationControlManager.createTopic's PartitionRegistration,
whose leader is the first ISR member). What CreateTopics placed is told to ``journal`` (``LayoutJournal``: the data
directory keeps it, as Kafka's controller keeps its PartitionRecords), and so is a deleted topic's forgetting.
Each election tells the server the new epoch (``on_elect``: the log stamps its batches with it from then on,
UnifiedLog.appendAsLeader), and a partition whose recovered log already carries epochs starts from them
(``log_epochs``: the cache rebuilt from the batches).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.cluster.hashing import OFFSETS_TOPIC, TRANSACTION_TOPIC, partition_for

NO_LEADER = -1
UNDEFINED = (-1, -1)  # OffsetForLeaderEpoch's UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


class LastRunningNode(Exception):
    """Stopping the last running node (the control API's 409)."""


class UnknownNode(Exception):
    pass


class LayoutJournal(Protocol):
    """Where a data directory keeps what the layout decides outside elections (nodes.py writes it to the journal)."""

    def placed(self, topic: str, value: dict[str, Any]) -> None:
        """A topic's placement (``placement_value``) was made or grown."""

    def forgotten(self, topic: str, partitions: list[int]) -> None:
        """The topic was deleted: its placement and these partitions' leaderships are gone."""


class _NoJournal:
    def placed(self, topic: str, value: dict[str, Any]) -> None:
        pass

    def forgotten(self, topic: str, partitions: list[int]) -> None:
        pass


@dataclass
class Leadership:
    """One partition's replicas, leader and leader epoch, and its leader-epoch cache (LeaderEpochFileCache)."""

    replicas: tuple[int, ...]
    leader: int
    epoch: int = 0
    # (epoch, start offset), oldest first. Epoch 0 starts at offset 0: what a single node has always stamped.
    epochs: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])


@dataclass(frozen=True, slots=True)
class Moved:
    """A leader change: the partition, its new leader (-1: offline) and epoch, and the leader before."""

    topic: str
    partition: int
    leader: int
    epoch: int
    previous: int


class ClusterLayout:
    """Nodes by id, in the order given (node i of ``serve --nodes N`` is ``node_ids[i]``)."""

    def __init__(
        self,
        node_ids: Sequence[int],
        *,
        offsets_partitions: int = 50,
        transaction_partitions: int = 50,
        replication_factor: int | None = None,
        topics: Callable[[], Iterable[tuple[str, int]]] = lambda: (),
        log_end: Callable[[str, int], int] = lambda _topic, _partition: 0,
        on_elect: Callable[[str, int, int], None] = lambda _topic, _partition, _epoch: None,
        log_epochs: Callable[[str, int], list[tuple[int, int]]] = lambda _topic, _partition: [],
    ) -> None:
        if not node_ids:
            raise ValueError("a cluster needs at least one node")
        self.order = tuple(node_ids)
        self.up = dict.fromkeys(self.order, True)
        self.offsets_partitions = offsets_partitions
        self.transaction_partitions = transaction_partitions
        self.replication_factor = replication_factor or min(3, len(self.order))
        self._topics = topics
        self._log_end = log_end
        # Told (topic, partition, epoch) at every election: the server stamps the partition's log with the new
        # leader's epoch (Partition.makeLeader; the batches it appends carry it, 4.3).
        self._on_elect = on_elect
        # A recovered log's epochs (issue 27): a partition's first leadership continues from them, never below.
        self._log_epochs = log_epochs
        self._leaderships: dict[tuple[str, int], Leadership] = {}
        # Replication factors CreateTopics asked for; any other topic has the default.
        self._factors: dict[str, int] = {}
        # Manual replica assignments (CreateTopics' and CreatePartitions' Assignments): topic -> partition ->
        # replicas, in the order given. A partition without one is placed round robin.
        self._assigned: dict[str, dict[int, tuple[int, ...]]] = {}
        self.journal: LayoutJournal = _NoJournal()
        # Internal partitions still loading on their new leader, until when (clock ms): see begin_load.
        self.loading: dict[tuple[str, int], float] = {}
        # Who leads each internal partition, by index: read on every coordinator request of a multi-node broker.
        self.group_coordinators = [self.leadership(OFFSETS_TOPIC, p).leader for p in range(offsets_partitions)]
        self.transaction_coordinators = [
            self.leadership(TRANSACTION_TOPIC, p).leader for p in range(transaction_partitions)
        ]

    # -- nodes ---------------------------------------------------------------------------------------------------

    def running(self) -> list[int]:
        return [node for node in self.order if self.up[node]]

    def controller(self) -> int:
        """The lowest running node id (Kafka: a random alive broker; never a stopped one), -1 if none runs."""
        running = self.running()
        return min(running) if running else NO_LEADER

    def _known(self, node: int) -> None:
        if node not in self.up:
            raise UnknownNode(f"no node {node}: the nodes are {', '.join(map(str, self.order))}")

    def stop(self, node: int) -> list[Moved]:
        """The node stops: every partition it led goes to its next running replica, epoch + 1 (4.5)."""
        self._known(node)
        if not self.up[node]:
            return []
        if self.running() == [node]:
            raise LastRunningNode(f"node {node} is the last running node")
        self._make_all()
        self.up[node] = False
        moves = []
        for (topic, partition), leadership in self._leaderships.items():
            if leadership.leader == node:
                moves.append(self._elect(topic, partition, leadership, self._first_running(leadership.replicas)))
        return moves

    def start(self, node: int) -> list[Moved]:
        """The node runs again and rejoins every ISR; it leads nothing, except partitions that had no running
        replica at all (they come back online with it)."""
        self._known(node)
        if self.up[node]:
            return []
        self.up[node] = True
        moves = []
        for (topic, partition), leadership in self._leaderships.items():
            if leadership.leader == NO_LEADER and node in leadership.replicas:
                moves.append(self._elect(topic, partition, leadership, node))
        return moves

    # -- partitions ----------------------------------------------------------------------------------------------

    def replicas_for(self, partition: int, replication_factor: int | None = None) -> tuple[int, ...]:
        count = len(self.order)
        factor = min(replication_factor or self.replication_factor, count)
        return tuple(self.order[(partition + k) % count] for k in range(factor))

    def leadership(self, topic: str, partition: int) -> Leadership:
        found = self._leaderships.get((topic, partition))
        if found is None:
            replicas = self._assigned.get(topic, {}).get(partition) or self.replicas_for(
                partition, self._factors.get(topic)
            )
            found = self._leaderships[(topic, partition)] = Leadership(replicas, self._first_running(replicas))
            recovered = self._log_epochs(topic, partition)
            if recovered and recovered[-1][0] > 0:
                # LeaderEpochFileCache rebuilt from the log's batches: the leader goes on in the last epoch.
                found.epochs = recovered
                found.epoch = recovered[-1][0]
                self._on_elect(topic, partition, found.epoch)
        return found

    def topic_leaderships(self) -> list[tuple[str, list[Leadership]]]:
        """Every ordinary topic's partitions, in order, with their leaderships (made now if not yet): what
        ``GET /v1/cluster`` shows as ``topics`` (the console's nodes strip counts who leads what from it)."""
        return [
            (topic, [self.leadership(topic, partition) for partition in range(partitions)])
            for topic, partitions in sorted(self._topics())
            if topic not in (OFFSETS_TOPIC, TRANSACTION_TOPIC)
        ]

    def isr(self, topic: str, partition: int) -> tuple[int, ...]:
        return tuple(node for node in self.leadership(topic, partition).replicas if self.up[node])

    def move_leader(self, topic: str, partition: int, node: int | None = None) -> Moved:
        """Make ``node`` the leader (None: the preferred replica), epoch + 1. A running node that is not a replica
        becomes one, first in the list."""
        leadership = self.leadership(topic, partition)
        target = leadership.replicas[0] if node is None else node
        self._known(target)
        if not self.up[target]:
            raise ValueError(f"node {target} is stopped")
        if target not in leadership.replicas:
            leadership.replicas = (target, *leadership.replicas[:-1]) if leadership.replicas else (target,)
        return self._elect(topic, partition, leadership, target)

    def add_topic(
        self, topic: str, replication_factor: int, assignments: Sequence[Sequence[int]] = (), first: int = 0
    ) -> None:
        """A topic CreateTopics made with ``replication_factor`` (1..N): its partitions get that many replicas; with
        ``assignments`` (checked by the caller: known nodes, none twice, all of one length), partition
        ``first + i`` gets exactly ``assignments[i]``, its first running node leading. CreatePartitions' manual
        assignments come here too, ``first`` the topic's old partition count."""
        self._factors[topic] = replication_factor
        if assignments:
            placed = self._assigned.setdefault(topic, {})
            for index, replicas in enumerate(assignments):
                placed[first + index] = tuple(replicas)
        self.journal.placed(topic, self.placement_value(topic))

    def forget_topic(self, topic: str, partitions: int = 0) -> None:
        """DeleteTopics: the topic's placement and leaderships gone (a namesake made later starts at epoch 0), in
        the data directory too: its ``partitions`` and any other leadership made of it."""
        self._factors.pop(topic, None)
        self._assigned.pop(topic, None)
        made = {partition for name, partition in self._leaderships if name == topic}
        for partition in made:
            del self._leaderships[(topic, partition)]
        self.journal.forgotten(topic, sorted(made | set(range(partitions))))

    def placement_value(self, topic: str) -> dict[str, Any]:
        """A topic's replication factor and manual assignments as a data directory keeps them
        (``restore_placements`` reads them back)."""
        assigned = sorted(self._assigned.get(topic, {}).items())
        return {
            "replication_factor": self._factors.get(topic, self.replication_factor),
            "assigned": [[partition, list(replicas)] for partition, replicas in assigned],
        }

    def restore_placements(self, stored: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """The placements a data directory kept, before the leaderships (a partition never elected since is placed
        again as CreateTopics placed it). An assignment naming a node this process does not have (another
        --nodes) is left out: that partition is placed round robin."""
        for topic, value in stored:
            self._factors[topic] = min(int(value["replication_factor"]), len(self.order))
            for partition, replicas in value.get("assigned", []):
                nodes = tuple(int(node) for node in replicas)
                if nodes and all(node in self.up for node in nodes):
                    self._assigned.setdefault(topic, {})[int(partition)] = nodes

    def epoch_for_offset(self, topic: str, partition: int, offset: int) -> int:
        """LeaderEpochFileCache.epochForOffset: the epoch of the entry ``offset`` falls in (the epoch its batch was
        stamped with), -1 before the first entry. ListOffsets answers it as the offset's leader epoch."""
        found = -1
        for epoch, start in self.leadership(topic, partition).epochs:
            if start > offset:
                break
            found = epoch
        return found

    def end_offset_for(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch as LeaderEpochFileCache.endOffsetFor answers it (4.4): (epoch, end offset)."""
        if epoch < 0:
            return UNDEFINED
        leadership = self.leadership(topic, partition)
        epochs = leadership.epochs
        if epoch == epochs[-1][0]:
            return epoch, self._log_end(topic, partition)
        if epoch > epochs[-1][0]:
            return UNDEFINED
        if epoch < epochs[0][0]:
            return epoch, epochs[0][1]
        for index, (entry_epoch, _start) in enumerate(epochs):
            if entry_epoch > epoch:
                return epochs[index - 1][0], epochs[index][1]
        return UNDEFINED  # not reached: the last entry is above ``epoch``

    # -- coordinators --------------------------------------------------------------------------------------------

    def group_partition(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    def transaction_partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.transaction_partitions)

    def group_coordinator(self, group_id: str) -> int:
        return self.group_coordinators[partition_for(group_id, self.offsets_partitions)]

    def transaction_coordinator(self, transactional_id: str) -> int:
        return self.transaction_coordinators[partition_for(transactional_id, self.transaction_partitions)]

    def begin_load(self, topic: str, partition: int, now_ms: float, delay_ms: int) -> None:
        """The new leader of an internal partition loads it: COORDINATOR_LOAD_IN_PROGRESS until ``now + delay``
        (cluster-and-durability.md 2.6: the broker shares one state, so a load takes no time unless a delay is set)."""
        if delay_ms > 0:
            self.loading[(topic, partition)] = now_ms + delay_ms
        else:
            self.loading.pop((topic, partition), None)

    def is_loading(self, topic: str, partition: int, now_ms: float) -> bool:
        until = self.loading.get((topic, partition))
        if until is None:
            return False
        if now_ms >= until:
            del self.loading[(topic, partition)]
            return False
        return True

    # -- what a data directory keeps (checklist 31) -------------------------------------------------------------

    def stored_value(self, topic: str, partition: int) -> dict[str, Any]:
        """A partition's leadership as a data directory keeps it (``restore`` reads it back)."""
        leadership = self.leadership(topic, partition)
        return {
            "replicas": list(leadership.replicas),
            "leader": leadership.leader,
            "epoch": leadership.epoch,
            "epochs": [list(entry) for entry in leadership.epochs],
        }

    def restore(self, stored: Iterable[tuple[str, int, Mapping[str, Any]]]) -> int:
        """The leaderships a data directory kept, after a restart (checklist 31: leaders as they were, epochs not
        reset). Which nodes were stopped is not kept: every node runs again, so a stored leader leads again, and a
        partition that had none (every replica stopped) is led by its first replica in the next epoch, which starts
        where the offline one did (nothing was written without a leader: LeaderEpochFileCache.assign replaces it).
        A row naming a node this process does not have (another --nodes) is left out: that partition starts afresh.
        The number restored."""
        restored = 0
        for topic, partition, value in stored:
            replicas = tuple(int(node) for node in value["replicas"])
            leader = int(value["leader"])
            if not replicas or any(node not in self.up for node in replicas) or (leader >= 0 and leader not in self.up):
                continue
            leadership = Leadership(
                replicas, leader, int(value["epoch"]), [(int(epoch), int(start)) for epoch, start in value["epochs"]]
            )
            if leader == NO_LEADER:
                leadership.leader = self._first_running(replicas)
                leadership.epoch += 1
                leadership.epochs[-1] = (leadership.epoch, leadership.epochs[-1][1])
            self._leaderships[(topic, partition)] = leadership
            if topic == OFFSETS_TOPIC and partition < self.offsets_partitions:
                self.group_coordinators[partition] = leadership.leader
            elif topic == TRANSACTION_TOPIC and partition < self.transaction_partitions:
                self.transaction_coordinators[partition] = leadership.leader
            restored += 1
        return restored

    def stamp_restored(self) -> None:
        """Once the partition logs are loaded: every leadership made so far (the restored ones) told to
        ``on_elect`` again, so that its leader appends in the epoch it was restored at. A log left alone goes on
        in the last epoch its batches carry, and an epoch in which nothing was written is in none of them: records
        written after the restart were stamped with the epoch before it, below the epoch cache's entry for their
        offsets (Kafka's leader appends in the epoch of its LeaderAndIsr, which the restart keeps)."""
        for (topic, partition), leadership in self._leaderships.items():
            self._on_elect(topic, partition, leadership.epoch)

    # -- internals -----------------------------------------------------------------------------------------------

    def _first_running(self, replicas: tuple[int, ...]) -> int:
        return next((node for node in replicas if self.up[node]), NO_LEADER)

    def _make_all(self) -> None:
        for topic, partitions in self._topics():
            for partition in range(partitions):
                self.leadership(topic, partition)

    def _elect(self, topic: str, partition: int, leadership: Leadership, leader: int) -> Moved:
        previous = leadership.leader
        leadership.leader = leader
        leadership.epoch += 1
        start = self._log_end(topic, partition)
        # LeaderEpochFileCache.assign: an epoch starting where the last one did replaces it.
        if leadership.epochs and leadership.epochs[-1][1] == start:
            leadership.epochs[-1] = (leadership.epoch, start)
        else:
            leadership.epochs.append((leadership.epoch, start))
        self._on_elect(topic, partition, leadership.epoch)
        if topic == OFFSETS_TOPIC:
            self.group_coordinators[partition] = leader
        elif topic == TRANSACTION_TOPIC:
            self.transaction_coordinators[partition] = leader
        return Moved(topic, partition, leader, leadership.epoch, previous)
