"""The nodes of ``serve --nodes N`` (issue 29; cluster-and-durability.md 4, 8): their listeners, and what stopping,
starting and moving does to the broker.

Node i (0-based) has node id ``--node-id + i`` and listens on each listener's port + i (an ephemeral port when the
listener's is 0), advertising its own address; every node shares the broker's state. ``broker/cluster/layout.py``
decides who leads what; this module applies it: it closes a stopped node's sockets and connections, tells the
group coordinator which of its partitions moved (parked JoinGroup/SyncGroup answered NOT_COORDINATOR, session timers
restarted, as Kafka's unload and load do: cluster-and-durability.md 2.3-2.6), starts the new leader's load delay, and
says all of it in events.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from broker.changes import NULL_CHANGES, Change, ChangeSink
from broker.cluster.hashing import OFFSETS_TOPIC, TRANSACTION_TOPIC
from broker.cluster.layout import ClusterLayout, LastRunningNode, Moved, UnknownNode
from broker.events.names import COORDINATOR_LOADED, COORDINATOR_UNLOADED, LEADER_MOVED, NODE_STARTED, NODE_STOPPED
from broker.timing.keys import coordinator_loaded_key

if TYPE_CHECKING:
    from broker.config.settings import Settings
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.events.hub import GroupEvents
    from broker.server.acceptor import Acceptor
    from broker.server.host import OpenConnection
    from broker.storage.partition_log import PartitionLog
    from broker.storage.topics import TopicRegistry
    from broker.timing.purgatory import Purgatory

__all__ = ["LAYOUT", "LastRunningNode", "NodeSet", "UnknownNode"]

INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_TOPIC)
# The prefix of every change the layout keeps in a data directory.
LAYOUT = "cluster."
# A partition's leadership in a data directory (checklist 31), key (topic, partition): ClusterLayout.stored_value.
LEADERSHIP = "cluster.leadership"
# A topic's replication factor and manual replica assignments, key (topic,): ClusterLayout.placement_value (what
# Kafka's controller keeps in its PartitionRecords' replica lists).
PLACEMENT = "cluster.placement"


class JournalledPlacements:
    """The layout's ``LayoutJournal`` with a data directory: placements put, a deleted topic's rows deleted (one
    journal entry, as DeleteTopics' records are one batch)."""

    def __init__(self, changes: ChangeSink) -> None:
        self._changes = changes

    def placed(self, topic: str, value: dict[str, Any]) -> None:
        self._changes.put(PLACEMENT, (topic,), value)

    def forgotten(self, topic: str, partitions: list[int]) -> None:
        with self._changes.atomic():
            self._changes.delete(PLACEMENT, (topic,))
            for partition in partitions:
                self._changes.delete(LEADERSHIP, (topic, partition))


class PartitionLogs:
    """What the layout asks of the shared store: a partition's log end (the start of a new epoch), the epochs a
    recovered log carries, and the stamp of a new leader's epoch on the log it appends to (Partition.makeLeader)."""

    def __init__(self, topics: Callable[[], TopicRegistry]) -> None:
        self._topics = topics

    def _log(self, name: str, partition: int) -> PartitionLog | None:
        topic = self._topics().get(name)
        return topic.log(partition) if topic is not None else None

    def end(self, name: str, partition: int) -> int:
        log = self._log(name, partition)
        return log.next_offset if log is not None else 0

    def epochs(self, name: str, partition: int) -> list[tuple[int, int]]:
        log = self._log(name, partition)
        return log.epoch_starts() if log is not None else []

    def stamp(self, name: str, partition: int, epoch: int) -> None:
        log = self._log(name, partition)
        if log is not None:
            log.leader_epoch = epoch


@dataclass
class Node:
    """One node: its id, its acceptors (one per listener) and how to bind them again."""

    node_id: int
    acceptors: list[Acceptor] = field(default_factory=list)
    # Per listener: listen again on the port it had (a new acceptor, accepting).
    rebind: list[Callable[[], Awaitable[Acceptor]]] = field(default_factory=list)


def make_nodes(
    settings: Settings,
    events: GroupEvents,
    connections: Callable[[], set[OpenConnection]],
    now_ms: Callable[[], float],
    topics: Callable[[], TopicRegistry],
    durable: tuple[ChangeSink, list[Change]] | None = None,
    purgatory: Purgatory | None = None,
) -> NodeSet:
    """The nodes ``settings`` ask for, node i with node id ``node_id + i``, and their layout over the topics
    ``topics()`` holds (asked at each use: the registry may still be loading when the nodes are made). With a data
    directory (its sink and what it kept of the layout: every ``cluster.`` change), the placements and leaderships as
    they were before the restart, and every later change kept."""
    cluster = settings.cluster
    logs = PartitionLogs(topics)
    layout = ClusterLayout(
        [settings.node_id + index for index in range(cluster.nodes)],
        offsets_partitions=cluster.offsets_topic_num_partitions,
        transaction_partitions=cluster.transaction_state_log_num_partitions,
        replication_factor=cluster.default_replication_factor or None,
        topics=lambda: [(topic.name, topic.partitions) for topic in topics().all()],
        log_end=logs.end,
        on_elect=logs.stamp,
        log_epochs=logs.epochs,
    )
    nodes = NodeSet(layout, events, connections, now_ms, cluster.coordinator_load_delay_ms)
    nodes.purgatory = purgatory
    if durable is not None:
        nodes.changes, stored = durable
        layout.journal = JournalledPlacements(nodes.changes)
        layout.restore_placements(
            (str(change.key[0]), change.value)
            for change in stored
            if change.kind == PLACEMENT and change.value is not None
        )
        layout.restore(
            (str(change.key[0]), int(change.key[1]), change.value)
            for change in stored
            if change.kind == LEADERSHIP and change.value is not None
        )
    return nodes


class NodeSet:
    """The nodes of this process and the verbs on them (the control API's ``/v1/cluster``)."""

    def __init__(
        self,
        layout: ClusterLayout,
        events: GroupEvents,
        connections: Callable[[], set[OpenConnection]],
        now_ms: Callable[[], float],
        load_delay_ms: int = 0,
    ) -> None:
        self.layout = layout
        self.nodes = {node_id: Node(node_id) for node_id in layout.order}
        self._events = events
        self._connections = connections
        self._now_ms = now_ms
        self.load_delay_ms = load_delay_ms
        # The group coordinator's hook: internal partitions that moved, (topic, partition) -> new leader.
        self.on_coordinators_moved: Callable[[list[Moved]], None] | None = None
        # The data plane's hook: data partitions whose leader changed (their parked fetches answer at once).
        self.on_leaders_moved: Callable[[list[Moved]], None] | None = None
        # Where every leader change is kept with a data directory (checklist 31: the layout survives a restart).
        self.changes: ChangeSink = NULL_CHANGES
        # Times the end of a load delay (``coordinator_loaded`` is said then); None: said at once.
        self.purgatory: Purgatory | None = None

    def listens(self, node_id: int, acceptor: Acceptor, again: Callable[[], Awaitable[Acceptor]]) -> None:
        """A listener of the node: its acceptor, and how it listens again after a stop."""
        self.nodes[node_id].acceptors.append(acceptor)
        self.nodes[node_id].rebind.append(again)

    # -- verbs ---------------------------------------------------------------------------------------------------

    async def stop(self, node_id: int, mode: str = "kill") -> dict[str, Any]:
        """Stop a node. kill: its connections drop at once, then its leaderships move; graceful: they move first
        (parked joins and syncs hear NOT_COORDINATOR), then its connections close. LastRunningNode for the last."""
        node = self._node(node_id)
        if not self.layout.up[node_id]:
            return {"node_id": node_id, "moved_leaders": [], "moved_coordinators": []}
        if self.layout.running() == [node_id]:
            raise LastRunningNode(f"node {node_id} is the last running node")
        # Nothing awaits until the node is down in the layout: a request at another node (or a second stop) sees
        # the node either running or stopped, never half stopped with its leaderships still in place.
        closing = self._drop(node, abort=True) if mode == "kill" else []
        moves = self.layout.stop(node_id)
        # The cause before its consequences: node_stopped, then each leader_moved, coordinator_(un)loaded.
        self._events.emit(NODE_STOPPED, "", {"node_id": node_id, "mode": mode, "moved_partitions": len(moves)})
        self._moved(moves, cause="node_stopped")
        if mode != "kill":
            closing = self._drop(node, abort=False)
        for acceptor in closing:
            await acceptor.wait_closed()
        return {
            "node_id": node_id,
            "moved_leaders": [[m.topic, m.partition, m.leader] for m in moves if m.topic not in INTERNAL_TOPICS],
            "moved_coordinators": [[m.topic, m.partition, m.leader] for m in moves if m.topic in INTERNAL_TOPICS],
        }

    async def start(self, node_id: int) -> dict[str, Any]:
        node = self._node(node_id)
        if self.layout.up[node_id]:
            return {"node_id": node_id, "moved_leaders": []}
        for rebind in node.rebind:
            node.acceptors.append(await rebind())
        moves = self.layout.start(node_id)
        self._events.emit(NODE_STARTED, "", {"node_id": node_id})
        self._moved(moves, cause="node_started")
        return {"node_id": node_id, "moved_leaders": [[m.topic, m.partition, m.leader] for m in moves]}

    def move_leader(self, topic: str, partition: int, node_id: int | None) -> Moved:
        moved = self.layout.move_leader(topic, partition, node_id)
        self._moved([moved], cause="moved")
        return moved

    def move_coordinator(self, key_type: str, key: str, node_id: int) -> Moved:
        if key_type == "transaction":
            topic, partition = TRANSACTION_TOPIC, self.layout.transaction_partition(key)
        else:
            topic, partition = OFFSETS_TOPIC, self.layout.group_partition(key)
        return self.move_leader(topic, partition, node_id)

    # -- what a move does ----------------------------------------------------------------------------------------

    def groups_moved_by(self, coordinator: GroupCoordinator) -> Callable[[list[Moved]], None]:
        """The ``on_coordinators_moved`` hook of the group coordinator: the moved ``__consumer_offsets``
        partitions are unloaded and loaded (coordinator/moves.py: parked JoinGroup/SyncGroup answered
        NOT_COORDINATOR, fresh sessions after the load delay). ``__transaction_state`` moves need nothing but the
        routing: the transaction coordinator's state is shared by every node, its timeouts count from each
        transaction's start as Kafka's TransactionStateManager reloads them."""

        def moved(moves: list[Moved]) -> None:
            groups = [m for m in moves if m.topic == OFFSETS_TOPIC]
            if groups:
                coordinator.coordinators_moved(
                    {m.partition for m in groups if m.leader >= 0}, self.layout.offsets_partitions,
                    self.load_delay_ms, offline={m.partition for m in groups if m.leader < 0},
                )  # fmt: skip

        return moved

    def _moved(self, moves: list[Moved], cause: str) -> None:
        now = self._now_ms()
        internal = [m for m in moves if m.topic in INTERNAL_TOPICS]
        if self.changes.enabled:
            with self.changes.atomic():  # one verb, one journal entry
                for moved in moves:
                    key = (moved.topic, moved.partition)
                    self.changes.put(LEADERSHIP, key, self.layout.stored_value(moved.topic, moved.partition))
        for moved in moves:
            self._events.emit(
                LEADER_MOVED, "",
                {"topic": moved.topic, "partition": moved.partition, "leader": moved.leader,
                 "previous": moved.previous, "leader_epoch": moved.epoch, "cause": cause},
            )  # fmt: skip
        for moved in internal:  # partitions: the internal topic's count, which a group id hashes over (analytics)
            fields = {"topic": moved.topic, "partition": moved.partition, "epoch": moved.epoch, "cause": cause,
                      "partitions": self._partitions(moved.topic)}  # fmt: skip
            self._events.emit(COORDINATOR_UNLOADED, "", {**fields, "node_id": moved.previous})
        data = [m for m in moves if m.topic not in INTERNAL_TOPICS]
        if data and self.on_leaders_moved is not None:
            self.on_leaders_moved(data)
        started = time.perf_counter()
        if internal and self.on_coordinators_moved is not None:
            self.on_coordinators_moved(internal)
        work_ms = (time.perf_counter() - started) * 1000  # the groups' unload (and load, without a delay)
        delay = self.load_delay_ms
        for moved in internal:
            loaded_key = coordinator_loaded_key(moved.topic, moved.partition)
            if self.purgatory is not None:
                self.purgatory.cancel(loaded_key)  # a load still running from an earlier move never ends
            if moved.leader < 0:
                continue
            self.layout.begin_load(moved.topic, moved.partition, now, delay)
            if delay > 0 and self.purgatory is not None:
                # Said when the load ends, as Kafka's CoordinatorRuntime logs a finished load: the analytics count
                # a move's cost to the clients from it.
                self.purgatory.schedule(loaded_key, delay, partial(self._loaded, moved, now, work_ms, cause))
            else:
                self._loaded(moved, now, work_ms, cause)

    def _loaded(self, moved: Moved, moved_at: float, work_ms: float, cause: str) -> None:
        self._events.emit(
            COORDINATOR_LOADED, "",
            {"topic": moved.topic, "partition": moved.partition, "node_id": moved.leader, "epoch": moved.epoch,
             "load_delay_ms": self.load_delay_ms, "duration_ms": round(self._now_ms() - moved_at + work_ms, 3),
             "previous": moved.previous, "cause": cause, "partitions": self._partitions(moved.topic)},
        )  # fmt: skip

    def _partitions(self, topic: str) -> int:
        layout = self.layout
        return layout.offsets_partitions if topic == OFFSETS_TOPIC else layout.transaction_partitions

    def _drop(self, node: Node, *, abort: bool) -> list[Acceptor]:
        """Close the node's listening sockets (its port refuses at once, and is free to listen on again), then
        its connections: aborted (kill: no answer goes out) or hung up once their answers are written. All of it
        before the next await: the acceptors returned are the caller's to wait for."""
        closing, node.acceptors = node.acceptors, []
        for acceptor in closing:
            acceptor.close()
        for connection in list(self._connections()):
            if getattr(connection, "node_id", None) == node.node_id:
                if abort:
                    connection.abort()
                else:
                    connection.hang_up()
        return closing

    def _node(self, node_id: int) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            raise UnknownNode(f"no node {node_id}: the nodes are {', '.join(map(str, self.layout.order))}")
        return node

    # -- views ---------------------------------------------------------------------------------------------------

    def describe(self, endpoints: dict[int, tuple[str, int]], cluster_id: str) -> dict[str, Any]:
        """``GET /v1/cluster``: the nodes, the controller and every internal partition's leader."""
        layout = self.layout
        now = self._now_ms()

        def internal(topic: str, partitions: int) -> list[dict[str, Any]]:
            rows = []
            for partition in range(partitions):
                leadership = layout.leadership(topic, partition)
                state = "loading" if layout.is_loading(topic, partition, now) else "active"
                rows.append(
                    {"partition": partition, "leader": leadership.leader, "epoch": leadership.epoch,
                     "state": state if leadership.leader >= 0 else "offline"}
                )  # fmt: skip
            return rows

        nodes = []
        for node_id in layout.order:
            host, port = endpoints.get(node_id, ("", 0))
            nodes.append({"node_id": node_id, "host": host, "port": port, "up": layout.up[node_id]})
        return {
            "cluster_id": cluster_id,
            "controller": layout.controller(),
            "nodes": nodes,
            "load_delay_ms": self.load_delay_ms,
            "internal": {
                OFFSETS_TOPIC: internal(OFFSETS_TOPIC, layout.offsets_partitions),
                TRANSACTION_TOPIC: internal(TRANSACTION_TOPIC, layout.transaction_partitions),
            },
            # The ordinary topics' leaders too, so that a reader sees every leadership a node holds (the console's
            # nodes strip) without a Metadata request, which a browser cannot make.
            "topics": {
                topic: [
                    {"partition": partition, "leader": leadership.leader, "epoch": leadership.epoch}
                    for partition, leadership in enumerate(leaderships)
                ]
                for topic, leaderships in layout.topic_leaderships()
            },
        }
