"""The nodes of the broker in the control API (issue 29; cluster-and-durability.md 8.2): read the cluster, stop and
start nodes, move coordinators and partition leaders, and set the coordinator load delay.

``GET /v1/cluster`` works on a one-node broker too (one node; stopping it is 409, as stopping the last running
node of several is). Every verb says what it did in events (server/nodes.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from broker.cluster.hashing import OFFSETS_TOPIC, TRANSACTION_TOPIC
from broker.cluster.layout import LastRunningNode, Leadership, Moved, UnknownNode
from broker.control import bounded_json
from broker.control.http_guard import HttpLimits, json_error, read_body

if TYPE_CHECKING:
    from broker.server.broker import BrokerServer

__all__ = ["routes"]

_MODES = ("kill", "graceful")
_KEY_TYPES = ("group", "transaction")


def routes(server: BrokerServer, limits: HttpLimits) -> list[web.RouteDef]:
    handlers = ClusterRoutes(server, limits)
    return [
        web.get("/v1/cluster", handlers.describe),
        web.post("/v1/cluster/nodes/{node}/stop", handlers.stop),
        web.post("/v1/cluster/nodes/{node}/start", handlers.start),
        web.get("/v1/cluster/coordinators", handlers.coordinator),
        web.post("/v1/cluster/coordinators", handlers.move_coordinator),
        web.post("/v1/cluster/coordinators/load-delay", handlers.load_delay),
        web.post("/v1/cluster/partitions/{topic}/{partition}/leader", handlers.move_leader),
    ]


class ClusterRoutes:
    def __init__(self, server: BrokerServer, limits: HttpLimits) -> None:
        self.server = server
        self.limits = limits

    def _endpoints(self) -> dict[int, tuple[str, int]]:
        """The first listener's advertised address of every node (what its clients are told)."""
        server = self.server
        if server.node_endpoints:
            return next(iter(server.node_endpoints.values()))
        identity = server.api.identity
        return {identity.node_id: (identity.host, identity.port)}

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        raw = await read_body(request, self.limits)
        if not raw.strip():
            return {}
        try:
            body = bounded_json.loads(raw)
        except bounded_json.BadJson as bad:
            return json_error(400, str(bad))
        if not isinstance(body, dict):
            return json_error(400, "the body must be a JSON object")
        return body

    async def describe(self, request: web.Request) -> web.Response:
        return web.json_response(self.server.nodes.describe(self._endpoints(), self.server.settings.cluster_id))

    def _node(self, request: web.Request) -> int | web.Response:
        try:
            return int(request.match_info["node"])
        except ValueError:
            return json_error(400, f"a node id is an integer, not {request.match_info['node']!r}")

    async def stop(self, request: web.Request) -> web.Response:
        node = self._node(request)
        body = await self._body(request)
        if isinstance(node, web.Response):
            return node
        if isinstance(body, web.Response):
            return body
        mode = body.get("mode", "kill")
        if mode not in _MODES:
            return json_error(400, f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
        try:
            return web.json_response(await self.server.nodes.stop(node, mode))
        except UnknownNode as unknown:
            return json_error(404, str(unknown))
        except LastRunningNode as last:
            return json_error(409, str(last))

    async def start(self, request: web.Request) -> web.Response:
        node = self._node(request)
        if isinstance(node, web.Response):
            return node
        try:
            return web.json_response(await self.server.nodes.start(node))
        except UnknownNode as unknown:
            return json_error(404, str(unknown))
        except OSError as error:  # its port was taken meanwhile
            return json_error(409, f"node {node} cannot listen again: {error}")

    def _key(self, key_type: Any, key: Any) -> tuple[str, int] | web.Response:
        if key_type not in _KEY_TYPES:
            return json_error(400, f"type must be one of {', '.join(_KEY_TYPES)}, not {key_type!r}")
        if not isinstance(key, str):
            return json_error(400, "key must be a string: a group id or a transactional id")
        layout = self.server.nodes.layout
        if key_type == "transaction":
            return TRANSACTION_TOPIC, layout.transaction_partition(key)
        return OFFSETS_TOPIC, layout.group_partition(key)

    async def coordinator(self, request: web.Request) -> web.Response:
        found = self._key(request.query.get("type", "group"), request.query.get("key"))
        if isinstance(found, web.Response):
            return found
        topic, partition = found
        leadership = self.server.nodes.layout.leadership(topic, partition)
        return web.json_response(
            {"topic": topic, "partition": partition, "node": leadership.leader, "epoch": leadership.epoch}
        )

    async def move_coordinator(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        found = self._key(body.get("type", "group"), body.get("key"))
        if isinstance(found, web.Response):
            return found
        node = body.get("node")
        if not isinstance(node, int) or isinstance(node, bool):
            return json_error(400, "node must be a node id")
        topic, partition = found
        moved = self._move(topic, partition, node)
        if isinstance(moved, web.Response):
            return moved
        return web.json_response(
            {"topic": topic, "partition": partition, "node": moved.leader, "epoch": moved.epoch,
             "keys_moved_with_it": f"every key hashed to {topic} partition {partition}"}
        )  # fmt: skip

    async def load_delay(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        ms = body.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= 3_600_000:
            return json_error(400, "ms must be an integer from 0 to 3600000")
        self.server.nodes.load_delay_ms = ms
        return web.json_response({"load_delay_ms": ms})

    async def move_leader(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        topic_name = request.match_info["topic"]
        topic = self.server.topics.get(topic_name)
        try:
            partition = int(request.match_info["partition"])
        except ValueError:
            return json_error(400, f"a partition is an integer, not {request.match_info['partition']!r}")
        if topic is None or not 0 <= partition < topic.partitions:
            return json_error(404, f"no partition {topic_name}-{partition}")
        node = body.get("node")
        if body.get("preferred") is True:
            node = None
        elif not isinstance(node, int) or isinstance(node, bool):
            return json_error(400, 'give "node": a node id, or "preferred": true')
        moved = self._move(topic_name, partition, node)
        if isinstance(moved, web.Response):
            return moved
        return web.json_response({"leader": moved.leader, "epoch": moved.epoch})

    def _move(self, topic: str, partition: int, node: int | None) -> Leadership | Moved | web.Response:
        """Move the partition's leader to ``node`` (None: its preferred replica). A move to the running node that
        leads it already changes nothing, as Kafka's election answers ELECTION_NOT_NEEDED: same leader, same
        epoch, no unload and no load, no event."""
        nodes = self.server.nodes
        leadership = nodes.layout.leadership(topic, partition)
        target = leadership.replicas[0] if node is None else node
        try:
            if target == leadership.leader and nodes.layout.up.get(target, False):
                return leadership
            return nodes.move_leader(topic, partition, node)
        except UnknownNode as unknown:
            return json_error(404, str(unknown))
        except ValueError as stopped:
            return json_error(409, str(stopped))
