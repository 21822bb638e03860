"""What one node of a multi-node broker answers a request for a key it may not own (cluster-and-durability.md 1.2, 2.1).

Requests that need the group coordinator, sent to a node that does not lead the group's ``__consumer_offsets``
partition, answer NOT_COORDINATOR (CoordinatorRuntime.contextOrThrow); while the node still loads that partition,
COORDINATOR_LOAD_IN_PROGRESS. Transactional ids likewise over ``__transaction_state``
(TransactionStateManager.getAndMaybeAddTransactionState). The data plane likewise: a partition this node does not
lead answers NOT_LEADER_OR_FOLLOWER, a stale or future leader epoch FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
(cluster-and-durability.md 4.3; ``partition_error``). A single-node broker has no route at all (``ApiContext.route`` is
None), so none of this costs it anything.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.cluster.hashing import OFFSETS_TOPIC, TRANSACTION_TOPIC, partition_for
from broker.cluster.layout import ClusterLayout
from protocol.apis import ApiKey

# The requests the group coordinator serves, routed by the group id they name (KafkaApis hands them to the
# GroupCoordinator; CoordinatorRuntime answers NOT_COORDINATOR for a partition it does not host). Those naming
# several groups are answered per group instead (``PER_GROUP``).
GROUP_KEYED: frozenset[int] = frozenset(
    {
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    }
)  # fmt: skip
# The ones naming several groups, answered per group in their handlers (``broker.api.base.routed_away``): each group
# another node coordinates gets NOT_COORDINATOR in its own entry and the rest are served, as Kafka's
# GroupCoordinatorService fans them out per partition. OffsetFetch names several from v8 on (before, one GroupId).
PER_GROUP: frozenset[int] = frozenset(
    {
        ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    }
)  # fmt: skip
_OFFSET_FETCH_GROUPS_VERSION = 8
# The transaction coordinator's, by transactional id (an InitProducerId without one is any node's to answer).
TRANSACTION_KEYED: frozenset[int] = frozenset(
    {ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN}
)


_PARTITIONS_KEPT = 65_536


class NodeRoute:
    """One node's view: does it coordinate this key, does it lead this partition."""

    __slots__ = ("_partitions", "endpoints", "layout", "node_id", "now_ms")

    def __init__(
        self,
        layout: ClusterLayout,
        node_id: int,
        now_ms: Callable[[], float],
        endpoints: dict[int, tuple[str, int]],
    ) -> None:
        self.layout = layout
        self.node_id = node_id
        self.now_ms = now_ms
        # Every node's advertised (host, port) on this listener's name: Metadata and FindCoordinator hand them out.
        self.endpoints = endpoints
        # group id -> its __consumer_offsets partition: every Heartbeat asks (the pipeline's fast path), and a dict
        # lookup costs a third of partition_for's lru_cache call; the partition count never changes (fixed at creation).
        self._partitions: dict[str, int] = {}

    def group_error(self, group_id: str) -> ErrorCode | None:
        """None when this node coordinates ``group_id`` and has loaded it; else the error to answer."""
        layout = self.layout
        partition = self._partitions.get(group_id)
        if partition is None:
            partition = self._learn_partition(group_id)
        if layout.group_coordinators[partition] != self.node_id:
            return ErrorCode.not_coordinator
        if layout.loading and layout.is_loading(OFFSETS_TOPIC, partition, self.now_ms()):
            return ErrorCode.coordinator_load_in_progress
        return None

    def _learn_partition(self, group_id: str) -> int:
        partitions = self._partitions
        if len(partitions) >= _PARTITIONS_KEPT:
            partitions.clear()  # bounded: group ids seen once (e.g. probes) do not pile up
        partition = partitions[group_id] = partition_for(group_id, self.layout.offsets_partitions)
        return partition

    def transaction_error(self, transactional_id: str) -> ErrorCode | None:
        layout = self.layout
        partition = partition_for(transactional_id, layout.transaction_partitions)
        if layout.transaction_coordinators[partition] != self.node_id:
            return ErrorCode.not_coordinator
        if layout.loading and layout.is_loading(TRANSACTION_TOPIC, partition, self.now_ms()):
            return ErrorCode.coordinator_load_in_progress
        return None

    @staticmethod
    def keyed(api_key: int, api_version: int) -> bool:
        """Whether a coordinator owns requests of this API as a whole (the pipeline asks before it reads their
        ids): not those answered per group (``PER_GROUP``)."""
        if api_key in PER_GROUP or (api_key == ApiKey.OFFSET_FETCH and api_version >= _OFFSET_FETCH_GROUPS_VERSION):
            return False
        return api_key in GROUP_KEYED or api_key in TRANSACTION_KEYED

    def request_error(self, api_key: int, group_id: str | None, transactional_id: str | None) -> ErrorCode | None:
        """The error a coordinator request gets on this node (None: serve it): by its group id, or its
        transactional id for the transaction coordinator's APIs."""
        if api_key in GROUP_KEYED:
            return None if group_id is None else self.group_error(group_id)
        if api_key in TRANSACTION_KEYED and transactional_id is not None:
            return self.transaction_error(transactional_id)
        return None

    def loading_groups(self) -> bool:
        """Whether a ``__consumer_offsets`` partition this node leads is still loading (ListGroups fails then)."""
        layout = self.layout
        if not layout.loading:
            return False
        now = self.now_ms()
        return any(
            topic == OFFSETS_TOPIC and layout.group_coordinators[partition] == self.node_id
            and layout.is_loading(topic, partition, now)
            for topic, partition in list(layout.loading)
        )  # fmt: skip

    def coordinates_group(self, group_id: str) -> bool:
        """Whether ListGroups on this node lists the group (each node lists the groups it coordinates)."""
        return self.layout.group_coordinator(group_id) == self.node_id

    def leads(self, topic: str, partition: int) -> bool:
        return self.layout.leadership(topic, partition).leader == self.node_id

    # -- the data plane (cluster-and-durability.md 4.3) ----------------------------------------------------------------

    def partition_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> ErrorCode | None:
        """None when this node leads the partition and ``current_leader_epoch`` (-1: unchecked) is its epoch; else
        the error, as Partition.getLocalLog orders them: checkCurrentLeaderEpoch first (a lower epoch
        FENCED_LEADER_EPOCH, a higher one UNKNOWN_LEADER_EPOCH), then NOT_LEADER_OR_FOLLOWER. A node that is no
        replica at all answers NOT_LEADER_OR_FOLLOWER at once (ReplicaManager.getPartitionOrError's
        HostedPartition.None for a topic the metadata knows); so does every node of a partition with no leader."""
        leadership = self.layout.leadership(topic, partition)
        if leadership.leader == self.node_id and current_leader_epoch in (-1, leadership.epoch):
            return None
        if current_leader_epoch != -1 and self.node_id in leadership.replicas:
            if current_leader_epoch < leadership.epoch:
                return ErrorCode.fenced_leader_epoch
            if current_leader_epoch > leadership.epoch:
                return ErrorCode.unknown_leader_epoch
        return ErrorCode.not_leader_or_follower

    def current_leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch): the CurrentLeader of a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer
        (KIP-951), so that a client moves to the new leader without asking Metadata first."""
        leadership = self.layout.leadership(topic, partition)
        return leadership.leader, leadership.epoch

    def leader_endpoints(self, leaders: set[int]) -> list[tuple[int, str, int]]:
        """(node id, host, port) of those leaders on this listener: a KIP-951 answer's NodeEndpoints."""
        return [(node, *self.endpoints[node]) for node in sorted(leaders) if node in self.endpoints]

    def in_sync(self, topic: str, partition: int) -> int:
        """How many replicas are in sync: the running ones (4.5), which acks=all compares with min.insync.replicas."""
        return len(self.layout.isr(topic, partition))
