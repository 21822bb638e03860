"""Which API family serves which API, and the routes of the families loaded so far.

What a route is (handler, error answer, who the request names) is declared beside its handler, in the family's
``ROUTES`` (``broker.api.base.Route``); this module only knows which family to import. A family's module is
imported on the first request of that family (issue 17): a broker answers its first ApiVersions with only
``api_versions.py`` loaded, and the handler modules (with the kio schemas they name) come in as clients use them.
``HANDLERS[key]`` is a plain dict lookup once the family is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from broker.api.api_versions import api_versions
from broker.api.base import Handler, Route
from protocol.apis import SUPPORTED_VERSIONS, ApiKey

# API key -> the module of broker.api that serves it, Kafka's KafkaApis.handle* split by family.
FAMILIES: dict[int, str] = {
    ApiKey.PRODUCE: "produce",
    ApiKey.INIT_PRODUCER_ID: "produce",
    ApiKey.ADD_PARTITIONS_TO_TXN: "transactions",
    ApiKey.ADD_OFFSETS_TO_TXN: "transactions",
    ApiKey.END_TXN: "transactions",
    ApiKey.WRITE_TXN_MARKERS: "txn_admin",
    ApiKey.DESCRIBE_PRODUCERS: "txn_admin",
    ApiKey.DESCRIBE_TRANSACTIONS: "txn_admin",
    ApiKey.LIST_TRANSACTIONS: "txn_admin",
    ApiKey.FETCH: "fetch",
    ApiKey.LIST_OFFSETS: "fetch",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "leader_epochs",
    ApiKey.CREATE_TOPICS: "topic_admin",
    ApiKey.DELETE_TOPICS: "topic_admin",
    ApiKey.CREATE_PARTITIONS: "topic_admin",
    ApiKey.DESCRIBE_CONFIGS: "configs",
    ApiKey.ALTER_CONFIGS: "configs",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "configs",
    ApiKey.DELETE_RECORDS: "cluster_admin",
    ApiKey.DESCRIBE_CLUSTER: "cluster_admin",
    ApiKey.DESCRIBE_ACLS: "acls",
    ApiKey.CREATE_ACLS: "acls",
    ApiKey.DELETE_ACLS: "acls",
    ApiKey.SASL_HANDSHAKE: "sasl",
    ApiKey.SASL_AUTHENTICATE: "sasl",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "scram_admin",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "scram_admin",
    ApiKey.METADATA: "metadata",
    ApiKey.FIND_COORDINATOR: "find_coordinator",
    ApiKey.JOIN_GROUP: "membership",
    ApiKey.SYNC_GROUP: "membership",
    ApiKey.HEARTBEAT: "membership",
    ApiKey.LEAVE_GROUP: "membership",
    ApiKey.OFFSET_COMMIT: "offsets",
    ApiKey.OFFSET_FETCH: "offsets",
    ApiKey.OFFSET_DELETE: "offsets",
    ApiKey.TXN_OFFSET_COMMIT: "txn_offsets",
    ApiKey.DESCRIBE_GROUPS: "groups",
    ApiKey.LIST_GROUPS: "groups",
    ApiKey.DELETE_GROUPS: "groups",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "consumer_groups",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "consumer_groups",
    ApiKey.SHARE_GROUP_HEARTBEAT: "share_groups",
    ApiKey.SHARE_GROUP_DESCRIBE: "share_groups",
    ApiKey.SHARE_FETCH: "share_fetch",
    ApiKey.SHARE_ACKNOWLEDGE: "share_fetch",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "share_admin",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "share_admin",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "share_admin",
}
# The modules the broker loads with its state (broker/server/broker.py STATE_MODULES).
FAMILY_MODULES = frozenset(f"broker.api.{module}" for module in FAMILIES.values())


class Handlers(dict[int, Handler]):
    """API key -> handler; a missing key loads its family's module (every key of that family at once)."""

    # Set by a broker whose state still loads in a worker thread (broker/server/broker.py): it finishes that
    # loading first, so that no module is ever imported on two threads at once.
    before_load: Callable[[], None] | None = None

    def __init__(self, loaded: Mapping[int, Handler]) -> None:
        super().__init__(loaded)
        self.routes: dict[int, Route] = {}

    def __missing__(self, api_key: int) -> Handler:
        return self.route(api_key).handler

    def route(self, api_key: int) -> Route:
        """The route of ``api_key``, its family loaded on first use (KeyError for an API no family serves)."""
        found = self.routes.get(api_key)
        if found is not None:
            return found
        module_name = FAMILIES[api_key]
        if self.before_load is not None:
            self.before_load()
        family: dict[int, Route] = importlib.import_module(f"broker.api.{module_name}").ROUTES
        assert set(family) == {key for key, name in FAMILIES.items() if name == module_name}, module_name
        for key, declared in family.items():
            self.routes[key] = declared
            self[key] = declared.handler
        return family[api_key]


HANDLERS = Handlers({ApiKey.API_VERSIONS: api_versions})

assert set(FAMILIES) | {ApiKey.API_VERSIONS} == set(SUPPORTED_VERSIONS), "every supported API needs a handler"
