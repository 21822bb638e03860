"""Which handler answers which API.

A family's module is imported on the first request of that family (issue 17): a broker answers its first
ApiVersions with only ``api_versions.py`` loaded, and the handler modules (with the kio schemas they name) come in
as clients use them. ``HANDLERS[key]`` is a plain dict lookup once the family is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from broker.api.api_versions import api_versions
from broker.api.base import Handler
from protocol.apis import SUPPORTED_VERSIONS, ApiKey

# API key -> (module of broker.api, handler function), Kafka's KafkaApis.handle* split by family.
ROUTES: dict[int, tuple[str, str]] = {
    ApiKey.PRODUCE: ("produce", "produce"),
    ApiKey.INIT_PRODUCER_ID: ("produce", "init_producer_id"),
    ApiKey.ADD_PARTITIONS_TO_TXN: ("transactions", "add_partitions_to_txn"),
    ApiKey.ADD_OFFSETS_TO_TXN: ("transactions", "add_offsets_to_txn"),
    ApiKey.END_TXN: ("transactions", "end_txn"),
    ApiKey.WRITE_TXN_MARKERS: ("txn_admin", "write_txn_markers"),
    ApiKey.DESCRIBE_PRODUCERS: ("txn_admin", "describe_producers"),
    ApiKey.DESCRIBE_TRANSACTIONS: ("txn_admin", "describe_transactions"),
    ApiKey.LIST_TRANSACTIONS: ("txn_admin", "list_transactions"),
    ApiKey.FETCH: ("fetch", "fetch"),
    ApiKey.LIST_OFFSETS: ("fetch", "list_offsets"),
    ApiKey.CREATE_TOPICS: ("topic_admin", "create_topics"),
    ApiKey.DELETE_TOPICS: ("topic_admin", "delete_topics"),
    ApiKey.CREATE_PARTITIONS: ("topic_admin", "create_partitions"),
    ApiKey.DESCRIBE_CONFIGS: ("configs", "describe_configs"),
    ApiKey.ALTER_CONFIGS: ("configs", "alter_configs"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("configs", "incremental_alter_configs"),
    ApiKey.DELETE_RECORDS: ("cluster_admin", "delete_records"),
    ApiKey.DESCRIBE_CLUSTER: ("cluster_admin", "describe_cluster"),
    ApiKey.DESCRIBE_ACLS: ("cluster_admin", "describe_acls"),
    ApiKey.CREATE_ACLS: ("cluster_admin", "create_acls"),
    ApiKey.DELETE_ACLS: ("cluster_admin", "delete_acls"),
    ApiKey.METADATA: ("metadata", "metadata"),
    ApiKey.FIND_COORDINATOR: ("find_coordinator", "find_coordinator"),
    ApiKey.JOIN_GROUP: ("membership", "join_group"),
    ApiKey.SYNC_GROUP: ("membership", "sync_group"),
    ApiKey.HEARTBEAT: ("membership", "heartbeat"),
    ApiKey.LEAVE_GROUP: ("membership", "leave_group"),
    ApiKey.OFFSET_COMMIT: ("offsets", "offset_commit"),
    ApiKey.OFFSET_FETCH: ("offsets", "offset_fetch"),
    ApiKey.OFFSET_DELETE: ("offsets", "offset_delete"),
    ApiKey.TXN_OFFSET_COMMIT: ("txn_offsets", "txn_offset_commit"),
    ApiKey.DESCRIBE_GROUPS: ("groups", "describe_groups"),
    ApiKey.LIST_GROUPS: ("groups", "list_groups"),
    ApiKey.DELETE_GROUPS: ("groups", "delete_groups"),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ("consumer_groups", "consumer_group_heartbeat"),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("consumer_groups", "consumer_group_describe"),
}


class Handlers(dict[int, Handler]):
    """API key -> handler; a missing key loads its family's module (every key of that family at once)."""

    # Set by a broker whose state still loads in a worker thread (broker/server/broker.py): it finishes that
    # loading first, so that no module is ever imported on two threads at once.
    before_load: Callable[[], None] | None = None

    def __missing__(self, api_key: int) -> Handler:
        module_name, _ = ROUTES[api_key]  # KeyError for an API we do not serve, as a plain dict would raise
        if self.before_load is not None:
            self.before_load()
        module = importlib.import_module(f"broker.api.{module_name}")
        for key, (name, function) in ROUTES.items():
            if name == module_name:
                self[key] = getattr(module, function)
        return self[api_key]

    def load_all(self) -> None:
        """Every handler now (a process that wants them all up front, such as the fuzz worker)."""
        for api_key in ROUTES:
            self[api_key]  # __missing__ loads it


HANDLERS = Handlers({ApiKey.API_VERSIONS: api_versions})

assert set(ROUTES) | {ApiKey.API_VERSIONS} == set(SUPPORTED_VERSIONS), "every supported API needs a handler"
