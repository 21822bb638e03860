"""The load generator of the several-node scenario (issue 29): each group at its coordinator's node.

A group's coordinator is asked for with FindCoordinator (v1, key type GROUP) at any node; its JoinGroup, SyncGroup
and Heartbeats then go to the node named. Three jobs (``benchmarks/jobs.py`` runs each in a fresh process):

* ``form_routed``: picks group ids spread evenly over the nodes (FindCoordinator for candidate ids, keeping one while
  its node has fewer than its share: groups // nodes, one more for the first groups % nodes nodes to get there),
  then forms each node's groups at that node (``loadgen.form_groups``);
* ``heartbeats_routed``: the classic pipelined Heartbeats (``loadgen.HeartbeatPipe``), each connection to one node and
  cycling through the members that node coordinates;
* ``failover``: one member of each group heartbeats at its coordinator, one request in flight, until the orchestrator
  stops a node (after the barrier); a group answered NOT_COORDINATOR (or whose connection closed) finds its
  coordinator again at the nodes still listening and heartbeats there; each group's first error and first answer
  with error 0 on its new node are timed (``time.monotonic``, one clock for every process of the machine).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

from benchmarks import wire
from benchmarks.loadgen import CLIENT_ID, Client, FormOptions, HeartbeatPipe, Member, connect, drive_pipes, form_groups

_HEAD = struct.Struct(">iihh")  # correlation id, throttle, error code, error message length (v1)
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
_REFIND = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE}


class Route(NamedTuple):
    node_id: int
    host: str
    port: int


class RoutedMember(NamedTuple):
    member: Member
    route: Route


def find_coordinator_body(group_id: str) -> bytes:
    """FindCoordinator v1: Key, KeyType 0 (group)."""
    return wire.string(group_id, False) + b"\x00"


def find_coordinator_frame(group_id: str, correlation_id: int = 1) -> bytes:
    return wire.frame(wire.FIND_COORDINATOR, 1, correlation_id, CLIENT_ID, find_coordinator_body(group_id))


def parse_find_coordinator(body: bytes) -> tuple[int, Route]:
    """A FindCoordinator v1 answer (after the size prefix): (error code, the coordinator's route)."""
    try:
        _, _, code, size = _HEAD.unpack_from(body, 0)
        pos = _HEAD.size + max(size, 0)
        (node_id,) = struct.unpack_from(">i", body, pos)
        (host_size,) = struct.unpack_from(">h", body, pos + 4)
        host = body[pos + 6 : pos + 6 + host_size].decode()
        (port,) = struct.unpack_from(">i", body, pos + 6 + host_size)
        if pos + 10 + host_size != len(body):
            raise wire.ParseError("bytes left over in the FindCoordinator answer")
    except (struct.error, UnicodeDecodeError) as error:
        raise wire.ParseError(f"FindCoordinator v1 answer does not parse: {error!r}") from error
    return int(code), Route(int(node_id), host, int(port))


class Finder:
    """FindCoordinator over one kept connection per node address, the addresses tried in turn (a stopped node's
    refuses, or hangs up)."""

    def __init__(self, addresses: Sequence[tuple[str, int]], timeout_s: float = 1.0) -> None:
        self.addresses = list(addresses)
        self.clients: dict[tuple[str, int], Client] = {}
        self.timeout_s = timeout_s
        self.start = 0

    async def find(self, group_id: str) -> Route | None:
        """The coordinator named by the first node that answers error 0 (None: none did)."""
        count = len(self.addresses)
        for step in range(count):
            address = self.addresses[(self.start + step) % count]
            try:
                client = self.clients.get(address)
                if client is None or client.closed:
                    client = await asyncio.wait_for(connect(*address), self.timeout_s)
                    self.clients[address] = client
                body = await asyncio.wait_for(client.send(find_coordinator_frame(group_id)), self.timeout_s)
                error, route = parse_find_coordinator(body)
            except (OSError, TimeoutError, wire.ParseError):
                self.clients.pop(address, None)
                self.start = (self.start + step + 1) % count  # start at the next one from now on
                continue
            if error == 0:
                return route
        return None

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


async def form_routed(
    addresses: Sequence[tuple[str, int]],
    tag: str,
    groups: int,
    members_per_group: int,
    options: FormOptions,
    max_generations: int,
    nodes: int,
    connections: int = 2000,
) -> dict[str, Any]:
    """``groups`` groups whose coordinators spread evenly over ``nodes`` nodes, each formed at its coordinator."""
    finder = Finder(addresses, timeout_s=5.0)
    # As even as it gets: every node groups // nodes, and the first groups % nodes nodes to reach that one more.
    share, extra = divmod(groups, nodes)
    chosen: dict[int, list[str]] = {}
    routes: dict[int, Route] = {}
    candidate = 0
    try:
        while sum(len(v) for v in chosen.values()) < groups and candidate < groups * 50 + 100:
            group_id = f"hbn-{tag}-{candidate:06d}"
            candidate += 1
            route = await finder.find(group_id)
            if route is None:
                raise RuntimeError(f"no node answered FindCoordinator for {group_id}")
            mine = chosen.setdefault(route.node_id, [])
            if len(mine) < share or (len(mine) == share and extra > 0):
                extra -= len(mine) == share
                mine.append(group_id)
                routes[route.node_id] = route
    finally:
        finder.close()
    members: list[RoutedMember] = []
    failures: list[str] = []
    started = time.perf_counter()
    for node_id in sorted(chosen):
        route = routes[node_id]
        formed = await form_groups(
            route.host, route.port, chosen[node_id], members_per_group, options, max_generations, connections
        )
        members.extend(RoutedMember(m, route) for m in formed["members"])
        failures.extend(formed["failures"])
    return {
        "members": members,
        "failures": failures,
        "seconds": time.perf_counter() - started,
        "groups_per_node": {str(node): len(ids) for node, ids in sorted(chosen.items())},
        "candidates_asked": candidate,
    }


async def heartbeats_routed(
    host: str,
    port: int,
    members: Sequence[RoutedMember],
    version: int,
    connections: int,
    window: int,
    seconds: float,
    refill: int = 16,
    barrier: Any = None,
) -> dict[str, Any]:
    """Pipelined Heartbeats for ``seconds``: connection c goes to node c mod (nodes), and a node's members are dealt
    to its connections round robin (``host`` and ``port``, the bootstrap, are unused: every member has its route)."""
    del host, port
    loop = asyncio.get_running_loop()
    answer = wire.heartbeat_answer(version, 1)
    offset = wire.heartbeat_error_offset(version)
    by_node: dict[Route, list[Member]] = {}
    for routed in members:
        by_node.setdefault(routed.route, []).append(routed.member)
    nodes = sorted(by_node)
    plan: dict[Route, int] = {route: 0 for route in nodes}
    for c in range(max(connections, len(nodes))):
        plan[nodes[c % len(nodes)]] += 1
    pipes: list[HeartbeatPipe] = []
    for route, count in plan.items():
        for c in range(count):
            mine = by_node[route][c::count] or by_node[route][:1]
            frames = [
                wire.frame(
                    wire.HEARTBEAT,
                    version,
                    1,
                    CLIENT_ID,
                    wire.heartbeat_body(version, m.group_id, m.generation_id, m.member_id, m.instance_id),
                )
                for m in mine
            ]
            _, pipe = await loop.create_connection(
                partial(HeartbeatPipe, frames, window, refill, [answer], offset), route.host, route.port
            )
            pipes.append(pipe)
    result = await drive_pipes(pipes, barrier, seconds)
    result["connections_per_node"] = {str(route.node_id): count for route, count in plan.items()}
    return result


async def _beat(client: Client, frame: bytes, offset: int) -> int | None:
    """One Heartbeat: its error code, None when the connection closed (or was refused) instead."""
    try:
        body = await asyncio.wait_for(client.send(frame), 2.0)
    except (ConnectionError, TimeoutError):
        return None
    return int(struct.unpack_from(">h", body, offset - 4)[0])


async def failover(
    addresses: Sequence[tuple[str, int]],
    members: Sequence[RoutedMember],
    version: int,
    after_s: float = 2.0,
    timeout_s: float = 30.0,
    pause_s: float = 0.001,
    barrier: Any = None,
) -> dict[str, Any]:
    """One member per group heartbeats at its coordinator, one request in flight, through the stop of a node."""
    offset = wire.heartbeat_error_offset(version)
    finder = Finder(addresses)
    loop = asyncio.get_running_loop()

    async def group(routed: RoutedMember) -> dict[str, Any]:
        m = routed.member
        frame = wire.frame(
            wire.HEARTBEAT, version, 1, CLIENT_ID,
            wire.heartbeat_body(version, m.group_id, m.generation_id, m.member_id, m.instance_id),
        )  # fmt: skip
        route = routed.route
        client = await connect(route.host, route.port)
        code = await _beat(client, frame, offset)
        if code != 0:
            raise RuntimeError(f"{m.group_id}: the first Heartbeat answered {code}")
        await released.wait()
        state: dict[str, Any] = {
            "group_id": m.group_id, "old_node": route.node_id, "new_node": route.node_id, "first_error_at": None,
            "first_error": None,
            "recovered_at": None, "found_at": None, "connected_at": None, "errors": {}, "refinds": 0, "beats": 0,
        }  # fmt: skip
        failing = False
        while True:
            now = time.monotonic()
            if now > deadline or (now > end_at and not failing):
                break
            code = await _beat(client, frame, offset)
            now = time.monotonic()
            if code == 0:
                state["beats"] += 1
                if failing:
                    failing = False
                    state["recovered_at"] = now
                    state["new_node"] = route.node_id
                continue
            key = "closed" if code is None else str(code)
            state["errors"][key] = state["errors"].get(key, 0) + 1
            if not failing:
                failing = True
                if state["first_error_at"] is None:
                    state["first_error_at"] = now
                    state["first_error"] = key
            if code is None or code in _REFIND:
                found = await finder.find(m.group_id)
                state["refinds"] += 1
                if found is not None and (found != route or client.closed):
                    state["found_at"] = time.monotonic()  # the last find that sent the group elsewhere
                    client.close()
                    route = found
                    try:
                        client = await asyncio.wait_for(connect(route.host, route.port), 1.0)
                        state["connected_at"] = time.monotonic()
                    except (OSError, TimeoutError):
                        client = Client()  # closed: the next beat re-finds
                        client.closed = True
            await asyncio.sleep(pause_s)
        client.close()
        return state

    released = asyncio.Event()
    tasks = [asyncio.create_task(group(routed)) for routed in members]
    await asyncio.sleep(0.2)  # every group connected and answered once
    for task in tasks:
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    if barrier is not None:
        await loop.run_in_executor(None, barrier.wait)
    released_at = time.monotonic()
    end_at = released_at + after_s
    deadline = released_at + timeout_s
    released.set()
    groups = await asyncio.gather(*tasks)
    finder.close()
    return {"released_at": released_at, "groups": groups}
