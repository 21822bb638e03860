"""The cluster calls of ``BrokerControl`` (``control.py``): the nodes of a multi-node broker (issue 29), over the
control API's ``/v1/cluster`` routes (docs/control-api.yaml)::

    # conftest.py: group_broker_settings returns {"nodes": 3}
    node = group_broker.coordinator_of("orders-app")
    group_broker.stop_node(node)                      # killed: its connections drop, its leaderships move
    with group_broker.no_rebalance("orders-app"):
        ...                                           # the consumers find the new coordinator and carry on
    group_broker.start_node(node)

On a one-node broker ``cluster()`` shows its one node and stopping it is ControlError(409).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.testing.waits import JSON, threaded

if TYPE_CHECKING:
    from broker.control.client import ControlClient

__all__ = ["AsyncCluster", "ClusterControl"]


class ClusterControl:
    """Stop and start nodes, move coordinators and leaders, set the coordinator load delay."""

    if TYPE_CHECKING:

        @property
        def client(self) -> ControlClient: ...

    def cluster(self) -> JSON:
        """``GET /v1/cluster``: ``cluster_id``, ``controller``, ``nodes`` (``node_id``, ``host``, ``port``, ``up``),
        ``load_delay_ms``, and ``internal``: per ``__consumer_offsets`` / ``__transaction_state`` partition its
        ``leader``, ``epoch`` and ``state`` (``active``, ``loading``, ``offline``)."""
        return self.client.cluster()

    def running_nodes(self) -> list[int]:
        return [int(node["node_id"]) for node in self.cluster()["nodes"] if node["up"]]

    def stop_node(self, node: int, graceful: bool = False) -> JSON:
        """Stop a node: killed by default (its port refuses, its connections drop unanswered, then every partition
        it led moves to its next running replica with the leader epoch + 1, coordinator partitions with them);
        ``graceful=True`` moves first (parked joins and syncs hear NOT_COORDINATOR), then closes. Returns
        ``moved_leaders`` and ``moved_coordinators`` (``[topic, partition, new leader]``); ControlError(409) for
        the last running node, 404 for an unknown one."""
        return self.client.stop_node(node, "graceful" if graceful else "kill")

    def start_node(self, node: int) -> JSON:
        """Start a stopped node again on its port: it rejoins every ISR and leads nothing (``move_leader(topic, p)``
        moves a partition back to its preferred replica)."""
        return self.client.start_node(node)

    def coordinator_of(self, group: str | None = None, *, transactional_id: str | None = None) -> int:
        """The node id that coordinates ``group`` (or ``transactional_id``): the leader of its internal partition,
        what FindCoordinator answers; -1 when no replica of that partition runs."""
        key, key_type = _key(group, transactional_id)
        return int(self.client.coordinator(key, key_type)["node"])

    def move_coordinator(self, group: str | None = None, *, transactional_id: str | None = None, to: int) -> JSON:
        """Move the coordinator of ``group`` (or ``transactional_id``) to node ``to``, with every key hashed to its
        partition: the old node unloads it, the new one loads it (COORDINATOR_LOAD_IN_PROGRESS while a load delay
        runs). Returns ``topic``, ``partition``, ``node``, ``epoch``; ControlError(409) for a stopped node."""
        key, key_type = _key(group, transactional_id)
        return self.client.move_coordinator(key, to, key_type)

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> JSON:
        """Move a partition's leader to node ``to`` (None: back to its preferred replica); the leader epoch rises.
        Returns ``leader`` and ``epoch``."""
        return self.client.move_leader(topic, partition, to)

    def load_delay(self, ms: int) -> JSON:
        """From now on a node that gains a coordinator partition answers COORDINATOR_LOAD_IN_PROGRESS for ``ms``
        milliseconds (0: off)."""
        return self.client.set_load_delay(ms)


def _key(group: str | None, transactional_id: str | None) -> tuple[str, str]:
    if (group is None) == (transactional_id is None):
        raise TypeError("name either a group or a transactional_id")
    return (group, "group") if group is not None else (str(transactional_id), "transaction")


class AsyncCluster:
    """``ClusterControl``'s calls as coroutines (``BrokerControl.aio``)."""

    def __init__(self, control: ClusterControl) -> None:
        self.cluster = threaded(control.cluster)
        self.running_nodes = threaded(control.running_nodes)
        self.stop_node = threaded(control.stop_node)
        self.start_node = threaded(control.start_node)
        self.coordinator_of = threaded(control.coordinator_of)
        self.move_coordinator = threaded(control.move_coordinator)
        self.move_leader = threaded(control.move_leader)
        self.load_delay = threaded(control.load_delay)
